"""A real SSH test fleet: N OpenSSH ``sshd`` processes on their own loopback addresses.

What it owns:

1. finding the ``sshd`` binary (``$FLEETSCHED_TEST_SSHD``, ``sshd`` on PATH, ``/usr/sbin/sshd``);
   with ``CI=true`` a missing one fails the run (``tests.servers.missing``);
2. one client key for the session (``ssh-keygen -t ed25519``), authorized on every host;
3. per host: its own ed25519 host key, a private ``sshd_config`` (ListenAddress 127.0.10.N, a
   free port, ``UsePAM no``, ``StrictModes no``, public keys only), a log file, and a scratch
   directory ``root`` where tests and actions write the host's files;
4. a ``known_hosts`` file with every host as ``[127.0.10.N]:port ssh-ed25519 ...``;
5. starting all hosts in parallel and killing, stopping or restarting one on demand;
6. :func:`start_jump_fleet`: bastions and the hosts behind them (the jump-host tests), sharing
   one client key and one ``known_hosts``; the bastions log at ``DEBUG1``, so their log shows
   each ``direct-tcpip`` channel they open.

The sshd processes run as the current user (root in CI), so a test checks a host's effects by
looking at the files directly (``host.root``) or with :meth:`FleetHost.sh`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.config import Settings
from tasks.host import Host
from tests.servers import free_port, missing

SSHD_CANDIDATES = ("/usr/sbin/sshd",)
UNPRIVILEGED_LOGIN = "fleetsched-nopw"  # a login without sudo rights (tests/executors/test_executor_ssh_become.py)
PASSWORD_LOGIN = "fleetsched-pw"  # a login whose sudo asks a password (test_executor_ssh_become_password.py)


def sshd_binary() -> str | None:
    """The OpenSSH server binary: ``$FLEETSCHED_TEST_SSHD``, PATH, then ``/usr/sbin/sshd``."""
    explicit = os.environ.get("FLEETSCHED_TEST_SSHD")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("sshd")
    if found:
        return found
    for path in SSHD_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return None


def keygen(path: Path, comment: str) -> str:
    """Make an ed25519 key pair at ``path`` (+ ``.pub``); return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    return Path(str(path) + ".pub").read_text().strip()


def wait_for_banner(host: str, port: int, timeout: float = 15.0) -> None:
    """Wait until an SSH server answers on ``host:port`` with its version banner."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        time.sleep(0.02)
    raise TimeoutError(f"no SSH banner on {host}:{port} after {timeout}s")


@dataclass
class FleetHost:
    """One sshd of the fleet. ``kill()`` is ``kill -9``; ``restart()`` keeps address and port."""

    name: str
    address: str
    binary: str
    dir: Path
    authorized_keys: Path
    port: int = 0
    proc: subprocess.Popen | None = None
    host_key_line: str = ""  # "ssh-ed25519 AAAA... comment"
    log_level: str = "VERBOSE"  # DEBUG1 for a bastion: its log shows direct-tcpip channels

    @property
    def root(self) -> Path:
        """The host's scratch directory: where tests put and look for its files."""
        return self.dir / "root"

    @property
    def config_path(self) -> Path:
        return self.dir / "sshd_config"

    @property
    def log_path(self) -> Path:
        return self.dir / "sshd.log"

    @property
    def known_hosts_line(self) -> str:
        """This host's ``known_hosts`` entry (``[address]:port keytype base64``)."""
        keytype, blob = self.host_key_line.split()[:2]
        return f"[{self.address}]:{self.port} {keytype} {blob}"

    def host(self, **changes: Any) -> Host:
        """The executor's view of this host (``Host``), optionally changed."""
        values: dict[str, Any] = {"name": self.name, "address": self.address, "port": self.port,
                                  "user": current_user(), "vars": {"root": str(self.root)}}
        values.update(changes)
        return Host(**values)

    def prepare(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(exist_ok=True)
        key = self.dir / "ssh_host_ed25519_key"
        if not key.exists():
            self.host_key_line = keygen(key, f"host-key-{self.name}")
        self.write_config()

    def new_host_key(self) -> None:
        """Give the host a fresh host key (a "changed key" for clients); restart to apply."""
        key = self.dir / "ssh_host_ed25519_key"
        key.unlink()
        Path(str(key) + ".pub").unlink()
        self.host_key_line = keygen(key, f"host-key-{self.name}-new")

    def write_config(self) -> None:
        if not self.port:
            self.port = free_port(self.address)
        self.config_path.write_text("\n".join([
            f"ListenAddress {self.address}",
            f"Port {self.port}",
            f"HostKey {self.dir / 'ssh_host_ed25519_key'}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            "StrictModes no",
            "UsePAM no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            "MaxSessions 50",
            "MaxStartups 100:30:200",
            f"LogLevel {self.log_level}",
            "Subsystem sftp internal-sftp",
            # sshd reads authorized keys as the user logging in, and an unprivileged login
            # (the become tests' NOPW_USER) cannot read this fleet's private directory:
            # root reads the same file for it.
            f"Match User {UNPRIVILEGED_LOGIN},{PASSWORD_LOGIN}",
            f"    AuthorizedKeysCommand {shutil.which('cat') or '/bin/cat'} {self.authorized_keys}",
            "    AuthorizedKeysCommandUser root",
            "",
        ]))

    def start(self, timeout: float = 15.0) -> None:
        """Start sshd in the foreground (``-D -e``), logging to ``sshd.log``; wait for the banner."""
        for attempt in range(3):
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [self.binary, "-D", "-e", "-f", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
            log.close()
            try:
                wait_for_banner(self.address, self.port, timeout)
                return
            except TimeoutError:
                exited = self.proc.poll() is not None
                self.kill()
                if not exited or attempt == 2:
                    raise RuntimeError(f"sshd for {self.name} did not start; see {self.log_path}:\n"
                                       + self.log_path.read_text()[-2000:]) from None
                # The port was taken between free_port() and bind(): pick another.
                self.port = 0
                self.write_config()

    def kill(self) -> None:
        """``kill -9`` the listening sshd and every connection and command it started."""
        if self.proc and self.proc.poll() is None:
            for pid in descendants(self.proc.pid):
                _kill9(pid)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Stop the listener and drop its connections (like a host going down)."""
        self.kill()

    def restart(self) -> None:
        """Kill and start again on the same address, port and host key."""
        self.kill()
        self.start()

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sh(self, script: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a shell snippet "on the host" (in its ``root`` directory) to check effects."""
        return subprocess.run(["sh", "-c", script], cwd=self.root, capture_output=True,
                              text=True, timeout=timeout)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found, then theirs), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill9(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def current_user() -> str:
    import getpass

    return getpass.getuser()


@dataclass
class SshFleet:
    """N sshd hosts sharing one client identity and one ``known_hosts`` file."""

    dir: Path
    hosts: list[FleetHost]
    identity: Path
    known_hosts: Path
    ssh_config: Path  # an empty ssh config, so the user's ~/.ssh/config cannot interfere
    options: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> FleetHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def __iter__(self):
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def write_known_hosts(self, extra: str = "") -> None:
        """Write ``known_hosts`` with every host's current key (plus ``extra`` lines)."""
        lines = [h.known_hosts_line for h in self.hosts]
        self.known_hosts.write_text("\n".join(lines) + "\n" + extra)

    def settings(self, **changes: Any) -> Settings:
        """Settings pointing the ssh executor at this fleet's known_hosts and ssh config."""
        import dataclasses

        values: dict[str, Any] = {"known_hosts": self.known_hosts, "ssh_config": self.ssh_config,
                                  "state_dir": self.dir / "state"}
        values.update(changes)
        return dataclasses.replace(Settings(), **values)

    def ssh_options(self, **changes: Any) -> dict[str, Any]:
        """Executor options: this fleet's identity file, no agent, no ~/.ssh/id_* keys."""
        values: dict[str, Any] = {"identity_file": str(self.identity), "allow_agent": False,
                                  "look_for_keys": False}
        values.update(changes)
        return values

    def executor(self, **options: Any):
        """A fresh ``ssh`` executor for this fleet (its own connection pool)."""
        from tasks.executors import build_executor

        return build_executor("ssh", self.ssh_options(**options), self.settings())

    def stop(self) -> None:
        for h in self.hosts:
            h.stop()


def start_fleet(base: Path, count: int = 4, prefix: str = "web", net: str = "127.0.10",
                client: Path | None = None, log_level: str = "VERBOSE") -> SshFleet:
    """Start ``count`` sshd hosts ``web-01``... on ``127.0.10.1``... in parallel; ``client``:
    an existing client key to authorize instead of a new one."""
    binary = sshd_binary()
    if binary is None:
        missing("OpenSSH sshd", "apt-get install openssh-server (or set FLEETSCHED_TEST_SSHD)")
    if shutil.which("ssh-keygen") is None:
        missing("ssh-keygen", "apt-get install openssh-client")
    assert binary is not None
    # sshd insists on its privilege-separation directory, even when run by hand.
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    identity = client or base / "id_ed25519"
    client_pub = (Path(str(client) + ".pub").read_text().strip() if client
                  else keygen(identity, "fleetsched-test-client"))
    authorized = base / "authorized_keys"
    authorized.write_text(client_pub + "\n")
    hosts = [
        FleetHost(name=f"{prefix}-{i:02d}", address=f"{net}.{i}", binary=binary,
                  dir=base / f"{prefix}-{i:02d}", authorized_keys=authorized, log_level=log_level)
        for i in range(1, count + 1)
    ]
    with ThreadPoolExecutor(max_workers=count) as pool:
        list(pool.map(FleetHost.prepare, hosts))
        list(pool.map(FleetHost.start, hosts))
    ssh_config = base / "ssh_config"
    ssh_config.write_text("")
    fleet = SshFleet(dir=base, hosts=hosts, identity=identity, known_hosts=base / "known_hosts",
                     ssh_config=ssh_config)
    fleet.write_known_hosts()
    return fleet


@dataclass
class JumpFleet:
    """Bastions and the hosts behind them, one client key, one ``known_hosts`` for all."""

    bastions: SshFleet
    inner: SshFleet
    known_hosts: Path

    def write_known_hosts(self, skip: tuple[str, ...] = ()) -> None:
        """Every sshd's key but those of the hosts named in ``skip``."""
        lines = [h.known_hosts_line for h in [*self.bastions, *self.inner] if h.name not in skip]
        self.known_hosts.write_text("\n".join(lines) + "\n")

    def settings(self, **changes: Any) -> Settings:
        return self.inner.settings(**{"known_hosts": self.known_hosts, **changes})

    def executor(self, **options: Any):
        from tasks.executors import build_executor

        return build_executor("ssh", self.inner.ssh_options(**options), self.settings())

    def stop(self) -> None:
        self.inner.stop()
        self.bastions.stop()


def start_jump_fleet(base: Path, bastions: int = 2, inner: int = 3) -> JumpFleet:
    """``jump-01``.. on 127.0.12.N (LogLevel DEBUG1) and ``inner-01``.. on 127.0.13.N. The
    workers (the tests) reach the inner hosts directly too, but the tests route them through
    the bastions and check the bastions' logs for the forwarded connections."""
    jumps = start_fleet(base / "jumps", count=bastions, prefix="jump", net="127.0.12",
                        log_level="DEBUG1")
    hosts = start_fleet(base / "inner", count=inner, prefix="inner", net="127.0.13",
                        client=jumps.identity)
    fleet = JumpFleet(jumps, hosts, base / "known_hosts")
    fleet.write_known_hosts()
    return fleet


__all__ = ["FleetHost", "JumpFleet", "SshFleet", "start_fleet", "start_jump_fleet",
           "sshd_binary"]
