"""Files through the shell: ``put``, ``rename`` and ``remove`` over exec channels, for hosts
whose sshd offers no SFTP (the host variable ``fleetsched_files=shell``, ``connect.py``).

1. ``put``: one ``sh -c`` that creates (or truncates) the file with umask 077, sets its mode
   before any byte is written (as the SFTP ``put`` does), copies standard input into it with
   ``cat`` and prints its ``sha256sum``; the data goes on the channel's stdin, never in a
   command line. The checksum must be the data's, else the upload failed;
2. ``rename``: ``mv -f`` within the directory the actions write to (one file system, so it is
   ``rename(2)``, atomic), refusing a destination that is a directory (``mv`` would move the
   file into it, where ``posix-rename`` fails);
3. ``remove``: ``rm -f``.

Paths and modes are arguments (``"$1"``), never pasted into the script. Commands run as the
login user, like SFTP, also under become. A refusal by the host (no such directory,
permission denied) is an ``OSError``; a command that never finished is a ``ConnectionError``
(worth a retry), as ``tasks.remote.is_transport_error`` tells them apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from tasks.host import CommandResult

Run = Callable[[list[str], float, "bytes | None"], CommandResult]

TIMEOUT_S = 600.0  # one file operation; the action's own deadline still applies around it
PUT = 'umask 077 && : > "$1" && chmod "$2" "$1" && cat > "$1" && sha256sum "$1"'
RENAME = ('if [ -d "$2" ] && [ ! -L "$2" ]; then echo "$2: Is a directory" >&2; exit 1; fi; '
          'exec mv -f -- "$1" "$2"')
REMOVE = 'exec rm -f -- "$1"'


def _check(result: CommandResult, what: str) -> CommandResult:
    if result.exit_code is None:
        why = "timed out" if result.timed_out else (result.error or "the connection was lost")
        raise ConnectionError(f"{what} through the shell did not finish: {why}")
    if result.exit_code != 0:
        lines = [ln.strip() for ln in (result.stderr_head + result.stderr_tail).splitlines()
                 if ln.strip()]
        raise OSError(f"{lines[-1] if lines else f'exit {result.exit_code}'}")
    return result


def put(run: Run, data: bytes, path: str, mode: int) -> None:
    """Write ``data`` to ``path`` with ``mode`` and check it arrived whole (point 1)."""
    result = _check(run(["sh", "-c", PUT, "sh", path, f"{mode:04o}"], TIMEOUT_S, data), "put")
    got = result.stdout_head.split()[:1]  # GNU marks an odd file name with a leading "\\"
    if [g.lstrip("\\") for g in got] != [hashlib.sha256(data).hexdigest()]:
        raise ConnectionError(f"put through the shell: {path} does not have the sha256 of the "
                              "data sent")


def rename(run: Run, src: str, dst: str) -> None:
    """Replace ``dst`` with ``src`` (point 2)."""
    _check(run(["sh", "-c", RENAME, "sh", src, dst], TIMEOUT_S, None), "rename")


def remove(run: Run, path: str) -> None:
    """Remove ``path``; a missing file is not an error (point 3)."""
    _check(run(["sh", "-c", REMOVE, "sh", path], TIMEOUT_S, None), "remove")


__all__ = ["put", "remove", "rename"]
