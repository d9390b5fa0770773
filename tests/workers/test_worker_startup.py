"""A worker node's start-up order (workers/serve.py): children boot before the master loads,
the record is checked before any claim, the recorder and the sender start after; the CLI
builds only the command it runs (scheduler/cli/app.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from scheduler.cli import app as cli_app
from scheduler.config import Settings
from scheduler.record import migrate
from tests.cli_support import run_cli
from tests.worker_support import KEYS, WorkerProcess, events, submit, wait_until, worker_args
from workers.config import NodeConfig
from workers.pool import Pool
from workers.protocol import Order

REPO = Path(__file__).resolve().parents[2]


def test_a_worker_whose_record_is_behind_stops_before_claiming_and_leaves_no_child(
        redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    # Given a due job, and a configured database nobody upgraded
    submit(redis_client, "t1", 1)
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    args = [a for a in worker_args("node-db", slots=2, processes=1) if a != "--no-recorder"]
    w = WorkerProcess(redis_url, tmp_path, args, env={"FLEETSCHED_DATABASE_URL": url}).start()
    # When the node starts (its children boot before the record is checked)
    try:
        rc = w.wait(60)
    finally:
        w.stop()
    # Then it stops with one line naming the fix, and claimed nothing
    log = w.log.read_text()
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert rc != 0, log
    assert len(errors) == 1 and "fleetsched db upgrade" in log, log
    assert not events(redis_client, ["claim"])
    assert redis_client.zcard(KEYS.due()) == 1
    # And no child it booted outlives it (children name their master: workers.child <fd> <pid>)
    assert w.proc is not None
    wait_until(lambda: not _children_naming(w.proc.pid), 10, "the booted children to go")


def _children_naming(master_pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"workers.child" in argv and argv[-2:-1] == [str(master_pid).encode()]:
            found.append(int(entry.name))
    return found


def test_a_node_checks_its_record_without_loading_the_orm_the_models_or_prometheus(
        tmp_path: Path) -> None:
    # What `fleetsched worker` loads before its first claim: the schema check and the
    # notification targets, not the ORM, the record's models, the notice detector, Alembic,
    # or prometheus_client (metrics are off by default)
    url = f"sqlite:///{tmp_path / 'record.db'}"
    migrate.upgrade(url)
    code = ("import sys\n"
            "from scheduler.config import Settings\n"
            "import workers.master\n"
            "from workers.serve import record_engine\n"
            f"record_engine(Settings(database_url={url!r}))\n"
            "heavy = ('sqlalchemy.orm', 'scheduler.record.models', 'scheduler.notify.detect',\n"
            "         'alembic', 'prometheus_client')\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_child_that_exits_before_the_node_attaches_is_handed_over_at_attach() -> None:
    # Given a pool booted before its node exists (no handlers yet)
    config = NodeConfig(Settings(), slots=2, processes=1, worker_id="boot")
    pool = Pool(config, threading.RLock())
    pool.ensure_warm()
    [child] = pool.children
    assert pool.wait_ready(30)
    # When its child dies before the node attaches
    child.kill("test")
    wait_until(lambda: child.exited, 15, "the child to be reaped")
    exits: list[object] = []
    pool.attach(lambda c, o: None, exits.append)
    # Then the node hears of it at attach, once
    assert exits == [child]
    assert pool.children == []


@pytest.mark.parametrize(("args", "command"), [
    (["worker"], "worker"),
    (["--redis-url", "redis://h:1/0", "--as", "bob", "worker", "--slots", "2"], "worker"),
    (["--state-dir=/tmp/x", "submit", "--help"], "submit"),
    (["version"], "version"),
    (["--help"], None),
    (["-h", "worker"], None),
    (["wroker"], None),
    (["--unknown", "worker"], None),
    ([], None),
])
def test_the_command_line_names_the_command_to_build(args: list[str], command: str | None) -> None:
    assert cli_app._invoked(args) == command


@pytest.mark.parametrize("name", [*cli_app.GROUPS, *cli_app.COMMANDS, "version"])
def test_each_command_built_alone_has_the_help_of_the_whole_cli(name: str) -> None:
    # `fleetsched <name> --help` (built alone) and the same help from the whole CLI
    code, alone, err = run_cli([name, "--help"])
    assert code == 0, err
    whole = CliRunner().invoke(cli_app.build(), [name, "--help"], prog_name="fleetsched",
                               env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert whole.exit_code == 0
    assert alone == whole.output


def test_a_subcommand_built_alone_runs_with_the_global_options(redis_url: str,
                                                              tmp_path: Path) -> None:
    code, out, err = run_cli(["--redis-url", redis_url, "--state-dir", str(tmp_path),
                              "worker", "list", "-o", "json"])
    assert code == 0, err
    assert out.strip() == "[]"


def _patched_worker(code: str, redis_url: str, tmp_path: Path) -> subprocess.Popen:
    """``code`` (which patches the node, then runs ``fleetsched worker``) in a process of its
    own, on ``redis_url``, with text logs on its stderr."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "FLEETSCHED_REDIS_URL": redis_url,
           "FLEETSCHED_STATE_DIR": str(tmp_path / "state"), "FLEETSCHED_LOG_FORMAT": "text",
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    return subprocess.Popen([sys.executable, "-P", "-c", code], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_node_that_fails_before_it_can_claim_stops_loudly_instead_of_hanging(
        redis_url: str, tmp_path: Path) -> None:
    # Given a node whose start fails inside its own thread, before it can claim (injected:
    # its children never get ready)
    code = ("import sys\n"
            "from workers.pool import Pool\n"
            "def broken(self, timeout, until=None):\n"
            "    raise RuntimeError('children never got ready')\n"
            "Pool.wait_ready = broken\n"
            "from scheduler.cli.app import main\n"
            "main(['worker', '--no-recorder', '--id', 'broken'])\n")
    # When it runs
    proc = _patched_worker(code, redis_url, tmp_path)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    # Then it exits non-zero with one error line saying why (it used to wait forever)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1, err
    assert len(errors) == 1 and "children never got ready" in errors[0], err
    # And the children it booted are gone
    wait_until(lambda: not _children_naming(proc.pid), 10, "the booted children to go")


def test_a_signal_while_the_children_warm_up_stops_the_node_before_its_first_claim(
        redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    # Given a due job, and a node whose children take long to get ready (injected: the wait
    # for them lasts until the node is told to stop, or 60 s)
    submit(redis_client, "t1", 1)
    code = ("import time\n"
            "from workers.pool import Pool\n"
            "def slow(self, timeout, until=None):\n"
            "    open('waiting', 'w').close()\n"
            "    end = time.monotonic() + 60\n"
            "    while time.monotonic() < end and not (until is not None and until.is_set()):\n"
            "        time.sleep(0.05)\n"
            "    return False\n"
            "Pool.wait_ready = slow\n"
            "from scheduler.cli.app import main\n"
            "main(['worker', '--no-recorder', '--id', 'slow'])\n")
    proc = _patched_worker(code, redis_url, tmp_path)
    try:
        wait_until(lambda: (tmp_path / "waiting").exists(), 30, "the node to wait for its child")
        # When SIGTERM reaches it while it waits for them
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    # Then it stops at once, claims nothing, and says nothing of having started
    assert proc.returncode == 0, err
    assert "SIGTERM" in err
    assert "slots in up to" not in err + out
    assert not events(redis_client, ["claim"])
    assert redis_client.zcard(KEYS.due()) == 1
    wait_until(lambda: not _children_naming(proc.pid), 10, "the booted children to go")


def test_a_job_that_reaches_a_child_after_its_timeout_is_failed_as_never_started() -> None:
    # Given a child of a node (simulate executor), and two jobs of a 2 s timeout: one placed
    # now, one placed 5 s ago (as if the child had taken that long to start)
    config = NodeConfig(Settings(), slots=2, processes=1, worker_id="late")
    pool = Pool(config, threading.RLock())
    done: list[object] = []
    pool.attach(lambda child, outcomes: done.extend(outcomes), lambda child: None)
    pool.ensure_warm()
    assert pool.wait_ready(30)
    spec = {"action": "command", "params": {"cmd": ["true"]}, "executor": "simulate",
            "executor_options": {"duration_ms": 0}}
    host = {"address": "127.0.0.1", "port": "22", "user": "", "vars": "{}"}
    now = time.monotonic()
    orders = [Order("t.0", 1, "t", "h0", host, spec, 2.0, 0, 0, now),
              Order("t.1", 1, "t", "h1", host, spec, 2.0, 0, 0, now - 5)]
    try:
        # When the master sends them
        assert pool.dispatch(pool.children[0], orders)
        wait_until(lambda: len(done) == 2, 30, "both outcomes")
    finally:
        pool.kill_all("test over")
    # Then the first runs; the second never starts, and may be retried
    by_job = {o.job_id: o for o in done}  # type: ignore[attr-defined]
    assert by_job["t.0"].ok
    late = by_job["t.1"]
    assert not late.ok and late.retryable and late.started_ms == 0
    assert "passed before it could start" in late.error
