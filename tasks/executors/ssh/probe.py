"""Checking one host the way the ssh executor reaches it, without running a job
(``fleetsched hosts check``, Ansible's ``ansible -m ping``).

The same steps as ``connect.connect``, each one's verdict kept instead of raised:

1. resolve the target from the host, the ssh options and ``~/.ssh/config``, with its jump
   hosts (``via``: ``jump-1 (10.0.0.9:2222)``, hops joined by `` -> ``);
2. TCP connect (``reachable``; ``latency_ms`` is the time the connect took); behind jump hosts,
   logging in to each of them as the executor does (``tunnel.Bastions``, strict host keys
   first; a bastion's failure is the row's, its message naming the bastion: ``unreachable``,
   ``unknown-key``, ``key-mismatch`` or ``auth-failed`` with ``reachable`` no), then the
   ``direct-tcpip`` channel from the last one to the host (``reachable``; ``latency_ms`` is the
   time that channel took to open);
3. SSH handshake and host key against ``known_hosts``: ``ok``, ``UNKNOWN`` (with the key's
   SHA256 fingerprint and the command to add it after checking it out of band), ``MISMATCH``
   (possible man-in-the-middle) or ``REVOKED``; strict: ``known_hosts`` is never written, and a
   host whose key is not ``ok`` is not logged in to;
4. authentication with the same agent and key files as the executor (``auth``);
5. ``id -un`` on the host (``remote_user``); with become (``become.py``) also
   ``sudo -n -u USER -- id -un`` (``become``), so a sudo that asks for a password shows here
   before a job finds it;
6. how files reach the host (``files``): ``sftp`` when an SFTP session starts as the executor
   starts it (``connect.start_sftp``), ``missing`` when sshd refuses it (a
   ``no-sftp`` host: it runs commands, but its ``copy``, ``script`` and ``firmware`` jobs
   fail), ``shell`` when the host's ``fleetsched_files=shell`` sends files through the shell
   (then ``cat``, ``sha256sum``, ``mv`` and ``rm`` must be there).
"""

from __future__ import annotations

import shlex
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import paramiko

from scheduler.config import Settings
from scheduler.errors import (
    AuthenticationError,
    BecomeError,
    ConfigError,
    FleetschedError,
    HostKeyError,
    HostUnreachableError,
    SftpUnavailableError,
)
from tasks.executors.ssh.become import become_of
from tasks.executors.ssh.connect import (
    authenticate,
    file_transfer_of,
    handshake,
    load_ssh_config,
    open_socket,
    resolve,
    start_sftp,
)
from tasks.executors.ssh.known_hosts import Entry, KnownHosts, Verdict, fingerprint
from tasks.executors.ssh.tunnel import Bastions
from tasks.host import CommandResult, Host

# ssh-keyscan -t names of the host-key types paramiko reports (ecdsa-sha2-* are all "ecdsa").
_KEYSCAN_TYPE = {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}
# What the shell file transfer needs on a host (point 6); prints the missing programs.
SHELL_TOOLS = ('m=; for t in cat sha256sum mv rm; do command -v "$t" >/dev/null 2>&1 || m="$m $t"; '
               'done; echo $m; [ -z "$m" ]')
# The verdicts of a host; ``Probe.status`` is one of them.
STATUSES = ("ok", "unreachable", "unknown-key", "key-mismatch", "auth-failed", "become-failed",
            "no-sftp", "error")


@dataclass
class Probe:
    """What checking one host found (one row of ``hosts check``)."""

    host: str
    address: str = ""
    port: int = 22
    user: str = ""  # the login user
    via: str = ""  # the jump hosts on the way, "jump-1 (10.0.0.9:2222) -> ..."; "" for direct
    reachable: bool = False
    host_key: str = ""  # ok, UNKNOWN, MISMATCH, REVOKED; "" when not reached
    fingerprint: str = ""  # SHA256:... of the key the host presented
    auth: str = ""  # ok, failed; "" when not tried
    remote_user: str = ""  # what id -un printed
    become: str = ""  # the become user it printed, "" without become
    files: str = ""  # sftp, shell, missing; "" when not tried
    latency_ms: float | None = None
    status: str = "error"
    error: str = ""
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fail(probe: Probe, status: str, exc: Exception) -> Probe:
    probe.status = status
    probe.error = str(exc)
    probe.hint = getattr(exc, "hint", None) or ""
    return probe


def _bastion_failed(probe: Probe, exc: FleetschedError) -> Probe:
    """A jump host refused or failed (point 2): the row says so, naming the bastion."""
    if isinstance(exc, HostKeyError):
        unknown = getattr(exc, "verdict", None) is Verdict.UNKNOWN
        return _fail(probe, "unknown-key" if unknown else "key-mismatch", exc)
    if isinstance(exc, (AuthenticationError, ConfigError)):
        return _fail(probe, "auth-failed", exc)
    return _fail(probe, "unreachable", exc)


def probe_host(host: Host, settings: Settings, options: dict[str, Any], timeout: float,
               bastions: Bastions | None = None) -> Probe:
    """Check ``host`` (see the module docstring); never raises for what it finds.
    ``bastions``: jump-host logins shared by the probes of one ``hosts check``; without it a
    host behind jump hosts gets its own."""
    own = bastions is None
    bastions = bastions or Bastions(Path(settings.known_hosts), options)
    try:
        return _probe(host, settings, options, timeout, bastions)
    finally:
        if own:
            bastions.close_all()


def _probe(host: Host, settings: Settings, options: dict[str, Any], timeout: float,
           bastions: Bastions) -> Probe:
    probe = Probe(host=host.name, address=host.connect_address, port=host.port,
                  user=host.user or "")
    try:
        target = resolve(host, load_ssh_config(settings.ssh_config), options, settings.ssh_config)
        become = become_of(host, options, password=False)  # sudo -n: never types a password
        files = file_transfer_of(host)
    except FleetschedError as exc:
        return _fail(probe, "error", exc)
    probe.address, probe.port, probe.user = target.address, target.port, target.user
    probe.via = target.route
    known = KnownHosts.load(Path(settings.known_hosts))
    release = None
    if target.via:
        try:
            bastions.login(target)  # the jump hosts first, timed apart from the host
        except (HostUnreachableError, HostKeyError, AuthenticationError, ConfigError) as exc:
            return _bastion_failed(probe, exc)
    start = time.monotonic()
    try:
        if target.via:
            sock, release = bastions.open(target)
        else:
            sock = open_socket(target, options)
    except HostUnreachableError as exc:
        return _fail(probe, "unreachable", exc)
    except (HostKeyError, AuthenticationError, ConfigError) as exc:  # a bastion changed meanwhile
        return _bastion_failed(probe, exc)
    probe.reachable = True
    probe.latency_ms = round((time.monotonic() - start) * 1000, 1)
    try:
        transport = handshake(sock, target, known, options)
    except HostKeyError as exc:  # offers none of the recorded key types
        _release(release)
        probe.host_key = "MISMATCH"
        return _fail(probe, "key-mismatch", exc)
    except HostUnreachableError as exc:
        _release(release)
        return _fail(probe, "unreachable", exc)
    try:
        key = transport.get_remote_server_key()
        probe.fingerprint = fingerprint(key.asbytes())
        verdict, entry = known.verify(target.known_hosts_names(), key.get_name(), key.get_base64())
        if verdict is not Verdict.KNOWN:
            return _key_problem(probe, verdict, entry, key, settings)
        probe.host_key = "ok"
        try:
            authenticate(transport, target, options)
        except (AuthenticationError, ConfigError) as exc:
            probe.auth = "failed"
            return _fail(probe, "auth-failed", exc)
        probe.auth = "ok"
        result = _run(transport, ["id", "-un"], timeout)
        if result.exit_code != 0:
            return _fail(probe, "error", FleetschedError(
                f"id -un on {host.name} failed (exit {result.exit_code}): "
                f"{(result.stderr_head or result.error or '').strip()[:200]}"))
        probe.remote_user = result.stdout_head.strip()
        if become is not None:
            try:
                result = become.check(_run(transport, become.wrap(["id", "-un"]), timeout))
            except BecomeError as exc:
                return _fail(probe, "become-failed", exc)
            if result.exit_code != 0:
                return _fail(probe, "become-failed", BecomeError(
                    f"become: sudo -u {become.user} on {host.name} failed "
                    f"(exit {result.exit_code}): {result.stderr_head.strip()[:200]}"))
            probe.become = result.stdout_head.strip()
        if files == "shell":
            result = _run(transport, ["sh", "-c", SHELL_TOOLS], timeout)
            if result.exit_code != 0:
                return _fail(probe, "error", FleetschedError(
                    f"{host.name} has fleetsched_files=shell, but the shell there lacks "
                    f"{' '.join(result.stdout_head.split()) or 'a POSIX sh'}"))
        else:
            try:
                _check_sftp(transport, target.where, timeout)
            except SftpUnavailableError as exc:
                probe.files = "missing"
                return _fail(probe, "no-sftp", exc)
        probe.files = files
        probe.status = "ok"
        return probe
    except HostUnreachableError as exc:
        return _fail(probe, "unreachable", exc)
    finally:
        transport.close()
        _release(release)


def _release(release: Any) -> None:
    if release is not None:
        release()


def _key_problem(probe: Probe, verdict: Verdict, entry: Entry | None, key: paramiko.PKey,
                 settings: Settings) -> Probe:
    path = settings.known_hosts
    if verdict is Verdict.UNKNOWN:
        probe.host_key = "UNKNOWN"
        probe.status = "unknown-key"
        probe.error = (f"host key {key.get_name()} {probe.fingerprint} of {probe.host} is not "
                       f"in {path}")
        port = f"-p {probe.port} " if probe.port != 22 else ""
        kind = _KEYSCAN_TYPE.get(key.get_name(), "ecdsa" if "ecdsa" in key.get_name() else "")
        probe.hint = (f"verify {probe.fingerprint} out of band (on the host: ssh-keygen -lf "
                      f"/etc/ssh/ssh_host_{kind or '*'}_key.pub), then add it: ssh-keyscan "
                      f"{f'-t {kind} ' if kind else ''}{port}{probe.address} >> {path} "
                      f"(ssh-keygen -lf {path} lists the fingerprints it then holds)")
        return probe
    line = f" (line {entry.lineno})" if entry is not None else ""
    probe.host_key = "REVOKED" if verdict is Verdict.REVOKED else "MISMATCH"
    probe.status = "key-mismatch"
    if verdict is Verdict.REVOKED:
        probe.error = f"host key {probe.fingerprint} of {probe.host} is @revoked in {path}{line}"
    else:
        probe.error = (f"host key of {probe.host} has CHANGED since it was recorded in "
                       f"{path}{line}: possible man-in-the-middle (it now presents "
                       f"{key.get_name()} {probe.fingerprint})")
    probe.hint = "if the host was reinstalled, verify the new key out of band and replace the line"
    return probe


def _check_sftp(transport: paramiko.Transport, where: str, timeout: float) -> None:
    """Start and close an SFTP session (point 6); ``SftpUnavailableError`` if the host has none."""
    try:
        chan = transport.open_session(timeout=timeout)
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise HostUnreachableError(f"opening a channel to {where} failed: "
                                   f"{exc or type(exc).__name__}") from None
    chan.settimeout(timeout)
    start_sftp(chan, where).close()


def _run(transport: paramiko.Transport, argv: list[str], timeout: float) -> CommandResult:
    """One short command on an authenticated transport; output is small (a user name)."""
    command = shlex.join(argv)
    start = time.monotonic()
    try:
        chan = transport.open_session(timeout=timeout)
        try:
            chan.settimeout(timeout)
            chan.exec_command(command)
            chan.shutdown_write()
            out = chan.makefile("rb").read(4096).decode(errors="replace")
            err = chan.makefile_stderr("rb").read(4096).decode(errors="replace")
            code = chan.recv_exit_status()
        finally:
            chan.close()
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise HostUnreachableError(f"running {command} failed: {exc or type(exc).__name__}"
                                   ) from None
    return CommandResult(command=command, exit_code=code, stdout_head=out, stderr_head=err,
                         duration_s=time.monotonic() - start)


__all__ = ["STATUSES", "Probe", "probe_host"]
