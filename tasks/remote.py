"""Host-side building blocks shared by the file-moving actions (script, copy, firmware).

What it owns:

1. reading a local file on the worker node (:func:`read_local`);
2. a private temporary directory on the host (:func:`make_temp_dir`: ``mktemp -d``, so it is
   created 0700 with an unpredictable name) and removing it again (:func:`remove_temp_dir`);
3. the SHA-256 of a file on the host (:func:`remote_sha256`, ``sha256sum``) and the check that
   an upload arrived intact (:func:`verify_upload`).

Every command is an argv (paths are absolute, so none can be read as an option). Uploads are
steps too (``Steps.file``), and a check that refuses a step's output names that step as the
one that decided the failure.
"""

from __future__ import annotations

import hashlib
import re

from tasks.base import StepFailed, Steps

__all__ = ["TEMP_PREFIX", "make_temp_dir", "read_local", "remote_sha256", "remove_temp_dir",
           "is_transport_error", "parse_sha256sum", "sha256_hex", "upload", "verify_upload"]

TEMP_PREFIX = "fleetsched."
_HEX = re.compile(r"\\?([0-9a-f]{64})\b")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_local(path: str, what: str) -> bytes:
    """The bytes of ``path`` on this worker node; a missing file fails the job for good."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise StepFailed(f"{what} {path} cannot be read on this worker: {exc.strerror}",
                         retryable=False) from None


def is_transport_error(exc: OSError) -> bool:
    """True for a broken connection (worth a retry); False for an SFTP status from the host's
    file system (paramiko raises those as plain ``IOError``, with or without an errno)."""
    return isinstance(exc, (ConnectionError, TimeoutError))


def upload(steps: Steps, data: bytes, path: str, what: str, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` on the host (SFTP). A refusal by the host's file system
    (no such directory, permission denied) fails for good; a broken connection may be retried."""
    try:
        steps.file(f"upload the {what}", f"put {path}",
                   lambda: steps.session.put(data, path, mode=mode))
    except OSError as exc:
        if is_transport_error(exc):
            raise
        raise StepFailed(f"upload of the {what} to {path} failed: {exc.strerror or exc}",
                         retryable=False, step=steps.last) from None


def make_temp_dir(steps: Steps, base: str) -> str:
    """A new private directory under ``base`` on the host (``mktemp -d``: mode 0700)."""
    base = base.rstrip("/") or "/"
    template = f"{base.rstrip('/')}/{TEMP_PREFIX}XXXXXXXXXX"
    result = steps.run(["mktemp", "-d", template], "create a private temporary directory")
    path = result.stdout_head.strip()
    prefix = f"{base.rstrip('/')}/{TEMP_PREFIX}"
    if not path.startswith(prefix) or "\n" in path or "/" in path[len(prefix):]:
        raise StepFailed(f"mktemp -d printed an unexpected path {path[:80]!r}", step=steps.last)
    return path


def remove_temp_dir(steps: Steps, path: str) -> None:
    """Remove a directory made by :func:`make_temp_dir` and everything in it."""
    if f"/{TEMP_PREFIX}" not in path:  # never rm -rf anything this module did not create
        raise StepFailed(f"refusing to remove {path!r}: not a fleetsched temporary directory")
    steps.run(["rm", "-rf", path], "remove the temporary directory", cleanup=True)


def remote_sha256(steps: Steps, path: str, what: str) -> str:
    """The SHA-256 of ``path`` on the host, by ``sha256sum``."""
    result = steps.run(["sha256sum", path], what)
    digest = parse_sha256sum(result.stdout_head)
    if digest is None:
        raise StepFailed(f"{what}: sha256sum printed no checksum", step=steps.last)
    return digest


def parse_sha256sum(output: str) -> str | None:
    """The checksum from ``sha256sum`` output (GNU prefixes a backslash for odd file names)."""
    m = _HEX.match(output.strip())
    return m.group(1) if m else None


def verify_upload(steps: Steps, path: str, expected: str, what: str) -> None:
    """Fail (retryable: the next upload may arrive intact) unless ``path`` hashes to ``expected``."""
    got = remote_sha256(steps, path, f"verify the checksum of the uploaded {what}")
    if got != expected:
        raise StepFailed(f"checksum mismatch for the uploaded {what}: the host has sha256 "
                         f"{got[:16]}..., the worker sent {expected[:16]}...", step=steps.last)
