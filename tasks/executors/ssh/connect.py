"""Opening one SSH connection: resolve the target, connect, check the host key, authenticate.

The order is what makes it safe:

1. resolve address, port, user and identity files from the ``Host``, the executor options and
   ``~/.ssh/config`` (``paramiko.SSHConfig``: HostName, Port, User, IdentityFile), and the jump
   hosts (``jump.py``), each resolved the same way; a ProxyCommand is refused with a clear
   message rather than silently bypassed;
2. TCP connect with the connect timeout (or, behind jump hosts, a ``direct-tcpip`` channel from
   the last one: ``tunnel.py``, where every hop goes through steps 2 to 4 itself), then the SSH
   handshake with banner and handshake
   timeouts, negotiating only host-key types that ``known_hosts`` holds for the host (as
   OpenSSH does), so a host with a recorded key cannot dodge the check with another type;
3. check the presented host key against ``known_hosts`` *before* authenticating: an unknown,
   changed or revoked key closes the connection with ``HostKeyError``; nothing runs on the
   host and nothing is written to ``known_hosts``;
4. public-key authentication with agent keys and key files, within the auth timeout.

:func:`start_sftp` starts the SFTP subsystem on an opened channel, for the executor and for
``hosts check`` alike: a host that refuses it raises ``SftpUnavailableError``, not
``HostUnreachableError``. :func:`file_transfer_of` reads whether a host's files go over SFTP
or, for a host without it, through the shell (the host variable ``fleetsched_files``).
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import paramiko

from scheduler.config import Settings
from scheduler.errors import (
    AuthenticationError,
    ConfigError,
    HostKeyError,
    HostUnreachableError,
    SftpUnavailableError,
)
from tasks.executors.options import DEFAULT_KEY_FILES, EXECUTOR_DEFAULTS, read_options
from tasks.executors.ssh import jump
from tasks.executors.ssh.exitsignal import Transport
from tasks.executors.ssh.known_hosts import KnownHosts, Verdict, fingerprint, host_key_name
from tasks.host import Host


@dataclass(frozen=True)
class Target:
    """Where and as whom to connect, after ``~/.ssh/config`` was applied; ``via``: the jump
    hosts it is reached through, first first (each a ``Target`` of its own)."""

    name: str
    address: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    via: tuple[Target, ...] = ()

    @property
    def endpoint(self) -> str:
        """``web-07 (127.0.10.7:2222)``."""
        return f"{self.name} ({self.address}:{self.port})"

    @property
    def where(self) -> str:
        """``web-07 (127.0.10.7:2222)`` for messages, ``... via jump-1`` behind a jump host."""
        if not self.via:
            return self.endpoint
        return f"{self.name} ({self.address}:{self.port} via {self.via[-1].name})"

    @property
    def route(self) -> str:
        """The jump hosts, ``jump-1 (10.0.0.9:2222) -> b2 (10.2.0.1:22)``; "" for a direct host."""
        return " -> ".join(hop.endpoint for hop in self.via)

    @property
    def login_key(self) -> tuple[str, str, int, tuple[str, ...]]:
        """Who, where, and with which key files: two ssh-config aliases of one bastion with
        different IdentityFile lines are two logins, never one riding on the other's."""
        return (self.user, self.address, self.port, self.identity_files)

    @property
    def pool_key(self) -> tuple[tuple[str, str, int, tuple[str, ...]], ...]:
        """Who, where, and through which hops: one address behind two bastions is two hosts."""
        return (self.login_key, *(hop.login_key for hop in self.via))

    def known_hosts_names(self) -> list[str]:
        names = [host_key_name(self.address, self.port)]
        if self.name != self.address:
            names.append(host_key_name(self.name, self.port))
        return names


def load_ssh_config(path: Path) -> paramiko.SSHConfig:
    try:
        return paramiko.SSHConfig.from_path(str(path)) if path.exists() else paramiko.SSHConfig()
    except (OSError, ValueError, paramiko.SSHException) as exc:
        raise ConfigError(f"ssh config {path}: {exc}", hint="fix the file or point "
                          "FLEETSCHED_SSH_CONFIG at another one") from None


def _lookup(config: paramiko.SSHConfig, name: str, config_path: Path) -> dict[str, Any]:
    try:
        found = config.lookup(name)
    except Exception as exc:  # paramiko raises several types for bad Match/Token lines
        raise ConfigError(f"ssh config {config_path} for {name}: {exc}") from None
    jump.refuse_proxycommand(found, name, config_path)
    return found


def _target(host: Host, found: dict[str, Any], options: dict[str, Any]) -> Target:
    address = host.address or found.get("hostname") or host.name
    port = host.port if host.port != 22 else int(found.get("port", 22))
    user = host.user or options["user"] or found.get("user") or getpass.getuser()
    files = list(options["identity_file"]) + list(found.get("identityfile", []))
    if options["look_for_keys"]:
        files += [str(Path.home() / ".ssh" / f) for f in DEFAULT_KEY_FILES]
    return Target(host.name, address, port, user, tuple(dict.fromkeys(files)))


def resolve(host: Host, config: paramiko.SSHConfig, options: dict[str, Any],
            config_path: Path) -> Target:
    """The host's target; explicit host fields win over options, options over ssh config.
    Its jump hosts (``jump.chain_of``) are resolved like hosts (``_hops``)."""
    found = _lookup(config, host.name, config_path)
    target = _target(host, found, options)
    chain = jump.chain_of(host, options, found, config_path)
    return replace(target, via=_hops(chain, config, options, config_path)) if chain else target


def _hops(chain: tuple[jump.Hop, ...], config: paramiko.SSHConfig, options: dict[str, Any],
          config_path: Path) -> tuple[Target, ...]:
    """Each hop's target: its name looked up in the ssh config (HostName, Port, User,
    IdentityFile), its own user and port winning; the ``user`` option is for the hosts, not
    for their bastions. The first hop's own ProxyJump goes before it, as OpenSSH's nested
    ``ssh`` for that hop would honour it."""
    hops = list(chain)
    out: list[Target] = []
    hop_options = {**options, "user": ""}
    while len(out) < len(hops):
        hop = hops[len(out)]
        found = _lookup(config, hop.host, config_path)
        before = jump.from_ssh_config(found, hop.host, config_path) if not out else ()
        if before:
            hops[:0] = before
            if len(hops) > jump.MAX_HOPS:
                raise ConfigError(f"ssh config {config_path}: the jump hosts before {hop.host} "
                                  f"make a chain of more than {jump.MAX_HOPS} (a loop?)",
                                  hint="give the bastion itself ProxyJump none")
            continue
        out.append(_target(Host(hop.host, port=hop.port or 22, user=hop.user), found,
                           hop_options))
    return tuple(out)


def ssh_options(options: Mapping[str, Any] | None, settings: Settings) -> dict[str, Any]:
    """The ssh executor's options, read and typed, with ``settings.ssh_identity_file`` added."""
    read = read_options("ssh", options, EXECUTOR_DEFAULTS["ssh"])
    if settings.ssh_identity_file:
        read["identity_file"] = read["identity_file"] + [
            p.strip() for p in settings.ssh_identity_file.split(",") if p.strip()]
    return read


def open_socket(target: Target, options: dict[str, Any]) -> socket.socket:
    """Step 2's TCP connect; ``HostUnreachableError`` when nothing answers."""
    try:
        return socket.create_connection((target.address, target.port),
                                        timeout=options["connect_timeout"])
    except OSError as exc:
        raise HostUnreachableError(f"cannot connect to {target.where}: {exc.strerror or exc}",
                                   hint="check that the host is up and sshd listens") from None


def handshake(sock: socket.socket, target: Target, known: KnownHosts, options: dict[str, Any]
              ) -> paramiko.Transport:
    """Step 2's SSH handshake on ``sock``, offering only the host-key types ``known`` records
    for the host; the host key is not checked yet (``check_host_key`` does that)."""
    transport = Transport(sock)  # paramiko's, keeping a command's exit-signal
    try:
        transport.banner_timeout = options["banner_timeout"]
        transport.handshake_timeout = options["connect_timeout"]
        transport.auth_timeout = options["auth_timeout"]
        security = transport.get_security_options()
        wanted = known.negotiable_types(target.known_hosts_names(), tuple(security.key_types))
        if wanted:
            security.key_types = wanted
        try:
            transport.start_client(timeout=options["connect_timeout"] + options["banner_timeout"])
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if wanted and "host key" in str(exc).lower():
                raise HostKeyError(
                    f"host key for {target.where} CHANGED: it offers none of the key types "
                    f"recorded in {known.path} ({', '.join(wanted)}); possible "
                    f"man-in-the-middle", hint="verify the host's key out of band") from None
            raise HostUnreachableError(f"SSH handshake with {target.where} failed: "
                                       f"{exc or type(exc).__name__}") from None
        return transport
    except BaseException:
        transport.close()
        raise


def connect(target: Target, known_hosts_path: Path, options: dict[str, Any],
            sock: Any = None) -> paramiko.Transport:
    """An authenticated transport to ``target``; see the module docstring for the order.
    ``sock``: the channel through the jump hosts (``tunnel.Bastions.open``), else TCP."""
    known = KnownHosts.load(known_hosts_path)
    transport = handshake(sock if sock is not None else open_socket(target, options), target,
                          known, options)
    try:
        check_host_key(target, transport.get_remote_server_key(), known, known_hosts_path,
                       target.known_hosts_names())
        authenticate(transport, target, options)
        return transport
    except BaseException:
        transport.close()
        raise


def check_host_key(target: Target, key: paramiko.PKey, known: KnownHosts, path: Path,
                   names: list[str]) -> None:
    """Raise ``HostKeyError`` unless ``key`` is the one known_hosts records for the host."""
    verdict, entry = known.verify(names, key.get_name(), key.get_base64())
    if verdict is Verdict.KNOWN:
        return
    fp = fingerprint(key.asbytes())
    if verdict is Verdict.UNKNOWN:
        missing = "" if known.exists else " (the file does not exist)"
        scan = f"ssh-keyscan -p {target.port} {target.address}"
        add = f"{scan} >> {path}"
        if target.via:  # only the last jump host reaches it
            add = f"run {scan} on {target.via[-1].name} and append its line to {path}"
        raise _key_error(
            Verdict.UNKNOWN, f"host key for {target.where} is not in {path}{missing}",
            hint=f"check the host's {key.get_name()} key {fp} out of band, then add it: {add}",
        )
    line = f" (line {entry.lineno})" if entry else ""
    if verdict is Verdict.REVOKED:
        raise _key_error(verdict, f"host key {fp} of {target.where} is marked @revoked in "
                                  f"{path}{line}")
    raise _key_error(
        verdict,
        f"host key for {target.where} has CHANGED since it was recorded in {path}{line}: "
        f"possible man-in-the-middle (it now presents {key.get_name()} {fp})",
        hint="if the host was reinstalled, verify the new key out of band and replace the line",
    )


def _key_error(verdict: Verdict, message: str, hint: str | None = None) -> HostKeyError:
    """``HostKeyError`` carrying its verdict (``verdict``), for ``hosts check``'s status."""
    error = HostKeyError(message, hint=hint)
    error.verdict = verdict  # type: ignore[attr-defined]
    return error


def candidate_keys(target: Target, options: dict[str, Any], agent: paramiko.Agent | None
                   ) -> tuple[list[tuple[str, Any]], list[str]]:
    """(label, key) pairs to offer: agent keys first, then key files; plus skip notes."""
    keys: list[tuple[str, Any]] = []
    notes: list[str] = []
    if agent is not None:
        keys += [(f"agent key {fingerprint(k.asbytes())}", k) for k in agent.get_keys()]
    explicit = set(options["identity_file"])
    for path in target.identity_files:
        if not os.path.exists(path):
            if path in explicit:
                raise ConfigError(f"identity file {path} does not exist")
            continue
        try:
            keys.append((path, paramiko.PKey.from_path(path)))
        except paramiko.PasswordRequiredException:
            notes.append(f"{path} needs a passphrase (load it into ssh-agent)")
        except (OSError, ValueError, paramiko.SSHException) as exc:
            notes.append(f"{path}: {exc}")
    return keys, notes


def authenticate(transport: paramiko.Transport, target: Target, options: dict[str, Any]) -> None:
    """Offer each key in turn; the agent connection is closed once the login is decided."""
    agent = None
    if options["allow_agent"] and os.environ.get("SSH_AUTH_SOCK"):
        try:
            agent = paramiko.Agent()
        except paramiko.SSHException:
            agent = None
    try:
        _authenticate(transport, target, options, agent)
    finally:
        if agent is not None:
            agent.close()


def _authenticate(transport: paramiko.Transport, target: Target, options: dict[str, Any],
                  agent: paramiko.Agent | None) -> None:
    keys, notes = candidate_keys(target, options, agent)
    for label, key in keys:
        try:
            transport.auth_publickey(target.user, key)
        except paramiko.BadAuthenticationType as exc:
            raise AuthenticationError(f"{target.where} does not accept public keys for "
                                      f"{target.user} (allowed: {', '.join(exc.allowed_types)})"
                                      ) from None
        except paramiko.AuthenticationException:
            notes.append(f"{label} refused")
            continue
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise HostUnreachableError(f"authentication with {target.where} failed: {exc}"
                                       ) from None
        if transport.is_authenticated():
            return
    tried = "; ".join(notes) if notes else "no key was available"
    raise AuthenticationError(
        f"{target.where} accepted no key for user {target.user} ({tried})",
        hint="load a key into ssh-agent or set the identity_file executor option",
    )


SFTP_HINT = ("enable it in the host's sshd_config (Subsystem sftp internal-sftp) and reload "
             "sshd, or set the host variable fleetsched_files=shell to move files through the "
             "shell; commands still run there")
FILES_VAR = "fleetsched_files"  # the host variable choosing how files reach the host
FILE_TRANSFERS = ("sftp", "shell")


def file_transfer_of(host: Host) -> str:
    """How files reach ``host``: ``sftp`` (the default) or ``shell`` (exec channels, for a host
    without SFTP: ``shellfiles.py``), from its ``fleetsched_files`` variable."""
    value = host.vars.get(FILES_VAR) if host.vars else None
    chosen = str(value).strip().lower() if value not in (None, "") else "sftp"
    if chosen not in FILE_TRANSFERS:
        raise ConfigError(f"host {host.name}: {FILES_VAR}={value!r} is not one of "
                          f"{', '.join(FILE_TRANSFERS)}",
                          hint=f"set {FILES_VAR}=shell for a host without SFTP, or remove it")
    return chosen


def start_sftp(chan: paramiko.Channel, where: str) -> paramiko.SFTPClient:
    """An SFTP client on ``chan`` (a fresh session channel). The transport dying meanwhile is
    ``HostUnreachableError``; sshd refusing the subsystem, or the subsystem ending before its
    version reply (a ``Subsystem`` line naming a missing program), is ``SftpUnavailableError``."""
    try:
        chan.invoke_subsystem("sftp")
        return paramiko.SFTPClient(chan)
    except (paramiko.SSHException, EOFError, OSError) as exc:
        chan.close()
        transport = chan.get_transport()
        if transport is None or not transport.is_active():
            raise HostUnreachableError(f"connection to {where} lost while starting SFTP: "
                                       f"{exc or type(exc).__name__}") from None
        raise SftpUnavailableError(f"{SftpUnavailableError.MESSAGE} {where}: its sshd refused "
                                   "the sftp subsystem", hint=SFTP_HINT) from None


__all__ = ["FILES_VAR", "FILE_TRANSFERS", "SFTP_HINT", "Target", "authenticate",
           "check_host_key", "connect", "file_transfer_of", "handshake", "load_ssh_config",
           "open_socket", "resolve", "ssh_options", "start_sftp"]
