"""What the benchmarks that run ``fleetsched worker`` as users do share: the command, its
environment, its processes, and the ack times read back from the event stream.

A node is the installed console script (``fleetsched`` beside this interpreter), started with
the options the caller names and nothing else, in its own session so a stop reaches its
children; its environment holds only the Redis and database URLs, a state directory and an empty
config file (no ``FLEETSCHED_*`` of the caller's leaks in).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

FLEETSCHED = str(Path(sys.executable).with_name("fleetsched"))


def node_env(tmp: Path, redis_url: str, database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a ``fleetsched`` command run by a benchmark (empty config file)."""
    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "config.toml"
    if not config.exists():
        config.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update(FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=database_url,
               FLEETSCHED_STATE_DIR=str(tmp / "state"), FLEETSCHED_CONFIG=str(config),
               FLEETSCHED_OPERATOR="bench", **extra)
    return env


def fleetsched(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """Run one ``fleetsched`` command to its end; its stdout. Exits with its error line."""
    done = subprocess.run([FLEETSCHED, *args], env=env, input=stdin, text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        sys.exit(f"error: fleetsched {' '.join(args[:2])} failed: {' / '.join(lines[-3:])}")
    return done.stdout


def record_with_hosts(env: dict[str, str], tmp: Path, hosts: int, *, token: str,
                      role: str) -> str:
    """The record migrated, ``hosts`` hosts (``host-00000`` ...) imported in group ``fleet``,
    and an API token named ``token`` of ``role`` created: the token (the server benchmarks)."""
    fleetsched(env, "db", "upgrade")
    inventory = tmp / "hosts.ini"
    inventory.write_text("[fleet]\n" + "".join(f"host-{n:05d}\n" for n in range(hosts)))
    fleetsched(env, "hosts", "import", str(inventory))
    return fleetsched(env, "tokens", "create", token, "--role", role).strip()


class ProcessGroup:
    """Worker processes, each in its own session (a stop reaches its children), logging to one
    file; ``stop`` sends SIGTERM to each group, then SIGKILL after ``stop_timeout_s``. The peer
    benchmark's driver (run by each peer's interpreter: this module needs only the standard
    library) starts its systems' workers with it too."""

    stop_timeout_s = 30.0

    def __init__(self, argvs: list[list[str]], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.log = log.open("ab")
        self.procs = [subprocess.Popen(argv, env=env, cwd=cwd, stdout=self.log, stderr=self.log,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
                      for argv in argvs]

    def check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                what = " ".join([Path(p.args[0]).name, *p.args[1:2]])
                raise SystemExit(f"error: {what} exited with {p.returncode} "
                                 f"(see {self.log.name})")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.log.close()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Nodes(ProcessGroup):
    """``fleetsched worker`` processes with the options of each ``argvs`` entry."""

    def __init__(self, env: dict[str, str], argvs: list[list[str]], log: Path) -> None:
        super().__init__([[FLEETSCHED, "worker", *argv] for argv in argvs], log, env)


def event_times(client: Any, stream: str, kinds: tuple[str, ...], after: str = "-") -> \
        tuple[dict[str, list[int]], str]:
    """The ``ts`` (Redis clock, ms) of every event of ``kinds`` after stream id ``after``, by
    kind; and the last id read (pass it back to read only what is new)."""
    out: dict[str, list[int]] = {k: [] for k in kinds}
    last = after
    start = after if after == "-" else "(" + after
    while True:
        chunk = client.xrange(stream, start, "+", count=10_000)
        if not chunk:
            return out, last
        for entry_id, fields in chunk:
            kind = fields.get(b"kind", fields.get("kind"))
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind in out:
                ts = fields.get(b"ts", fields.get("ts"))
                out[kind].append(int(ts))
        last = chunk[-1][0].decode() if isinstance(chunk[-1][0], bytes) else chunk[-1][0]
        start = "(" + last
