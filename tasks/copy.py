"""The ``copy`` action: put a file from the worker node on the host, atomically and verified.

Steps: if ``dest`` already has the file's SHA-256, mode (and owner, when asked), nothing is done
(``changed=False``; the action is idempotent). Otherwise the file goes over SFTP to a temporary
name next to ``dest`` (same directory, so the final rename is atomic on one file system), its
SHA-256 is checked on the host with ``sha256sum``, ``chown`` (only when ``owner`` is given) and
``chmod`` are applied, and it is renamed into place. Readers of ``dest`` see the old file or the
new one, never a half-written one. On any failure the temporary file is removed and ``dest`` is
untouched.

``dest`` may hold ``{host.*}`` placeholders (``/etc/app/{host.name}.conf``), each filled in as
one path component: a host value holding ``/`` or being ``..`` fails the job for good, naming
``dest``, before anything is written.
"""

from __future__ import annotations

import posixpath
import secrets
from typing import Any, ClassVar

from scheduler.errors import SftpUnavailableError
from tasks.argv import render_path
from tasks.base import ActionContext, BaseAction, StepFailed, Steps
from tasks.host import Host
from tasks.params import LocalPath, Mode, Owner, Param, RemotePath, Sha256
from tasks.remote import (
    is_transport_error,
    parse_sha256sum,
    read_local,
    sha256_hex,
    upload,
    verify_upload,
)


def temp_name_for(dest: str) -> str:
    """A hidden, unpredictable name in ``dest``'s directory."""
    head, tail = posixpath.split(dest)
    return posixpath.join(head, f".{tail}.fleetsched-{secrets.token_hex(6)}")


def _owner_matches(wanted: str, names: str, ids: str) -> bool:
    for have in (names, ids):
        user, _, group = have.partition(":")
        w_user, sep, w_group = wanted.partition(":")
        if w_user == user and (not sep or w_group == group):
            return True
    return False


class CopyAction(BaseAction):
    name = "copy"
    description = "Push a file to the host: temporary name, SHA-256 check, atomic rename, mode, owner."
    idempotent = True
    requires_window = False
    expected_ms = 15_000
    params: ClassVar[dict[str, Param]] = {
        "src": Param("src", LocalPath(), "the file on the worker node", required=True),
        "dest": Param("dest", RemotePath(placeholders=True), "where it goes on the host; "
                      "{host.*} placeholders are filled in, each one path component",
                      required=True),
        "mode": Param("mode", Mode(), "file mode on the host", default=0o644),
        "owner": Param("owner", Owner(), "chown to this user[:group] (default: leave as is)"),
        "sha256": Param("sha256", Sha256(), "refuse unless the source has this checksum"),
    }

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        data = read_local(params["src"], "source file")
        digest = sha256_hex(data)
        if params["sha256"] and digest != params["sha256"]:
            raise StepFailed(f"source file {params['src']} does not have the required sha256 "
                             f"{params['sha256'][:16]}...", retryable=False)
        dest = render_path(params["dest"], host, "dest")
        mode, owner = params["mode"], params["owner"]
        if self._already_in_place(steps, dest, digest, mode, owner):
            steps.changed = False
            return
        tmp = temp_name_for(dest)
        renamed = False
        try:
            try:
                upload(steps, data, tmp, "file")
            except SftpUnavailableError:
                renamed = True  # nothing was written, and removing over SFTP would fail again
                raise
            verify_upload(steps, tmp, digest, "file")
            if owner:
                steps.run(["chown", owner, tmp], f"chown {owner}")
            steps.run(["chmod", f"{mode:04o}", tmp], f"chmod {mode:04o}")
            try:
                steps.file("rename into place", f"rename {tmp} {dest}",
                           lambda: steps.session.rename(tmp, dest))
            except OSError as exc:
                if is_transport_error(exc):
                    raise
                raise StepFailed(f"rename into {dest} failed: {exc.strerror or exc}",
                                 retryable=False, step=steps.last) from None
            renamed = True
            steps.changed = True
        finally:
            if not renamed:
                steps.cleanup("remove the temporary file", lambda: steps.file(
                    "remove the temporary file", f"remove {tmp}",
                    lambda: steps.session.remove(tmp), cleanup=True))

    def _already_in_place(self, steps: Steps, dest: str, digest: str, mode: int,
                          owner: str | None) -> bool:
        probe = steps.run(["sha256sum", dest], "checksum of the current file", check=False)
        if "Is a directory" in probe.stderr_head:
            raise StepFailed(f"{dest} is a directory on the host; dest must name a file",
                             retryable=False, step=steps.last)
        if probe.exit_code != 0 or parse_sha256sum(probe.stdout_head) != digest:
            return False  # missing, unreadable or different: copy it
        stat = steps.run(["stat", "-c", "%a %U:%G %u:%g", dest], "stat the current file")
        fields = stat.stdout_head.split()
        if len(fields) != 3:
            return False
        return int(fields[0], 8) == mode and (not owner or _owner_matches(owner, *fields[1:]))
