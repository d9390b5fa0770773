"""``tasks output --follow`` on real sshd hosts, through the whole pipeline: ``fleetsched
submit`` -> a real worker node (ssh executor, its recorder) publishing each line as the command
prints it (``workers.liveout``) -> ``fleetsched tasks output TASK --follow`` (a real process)
reading the task's Redis stream.

The command prints its first line, then blocks on a release file the test creates only once
the follower has shown that line: the follower is live, not reading the record afterwards. A
secret resolved on the worker (``@env:``) and printed by the command is masked in the stream,
as in the record. Once the task ended the node gives its stream a minute; after it is gone,
``--follow`` prints the recorded output."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from scheduler.queue.keys import Keys
from scheduler.record.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.submit_support import Cli, inventory, sql_rows
from tests.worker_support import ROOT, WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd

SECRET = "liVe-S3cret-5a7e-91bc"
KEYS = Keys()
# The first line, then wait for the release file (at most 60 s), then stderr and a last line
SCRIPT = ('echo "first on $1 token=$3"; i=0; while [ ! -e "$2/release" ] && [ $i -lt 600 ]; '
          'do sleep 0.1; i=$((i+1)); done; echo "second on $1" >&2; echo "last on $1"')
CMD = f"cmd=sh -c '{SCRIPT}' sh {{host.name}} {{host.vars.root}} @env:FS_LIVE_SECRET"


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str, ssh_fleet: SshFleet):
    """(cli, worker, ssh options) on a record with the fleet imported; the node not started."""
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    lines = [f"{h.name} ansible_host={h.address} ansible_port={h.port} "
             f"ansible_user={current_user()} root={h.root}" for h in ssh_fleet]
    inventory(cli, tmp_path, "[web]\n" + "\n".join(lines) + "\n")
    for h in ssh_fleet:
        (h.root / "release").unlink(missing_ok=True)
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config), "FLEETSCHED_DATABASE_URL": db,
           "FS_LIVE_SECRET": SECRET}
    args = [a for a in worker_args("live-1", slots=4, processes=1) if a != "--no-recorder"]
    worker = WorkerProcess(redis_url, tmp_path, args, env=env)
    ssh = ["--executor-option", f"identity_file={ssh_fleet.identity}",
           "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false"]
    yield cli, worker, ssh
    worker.stop()
    for h in ssh_fleet:
        (h.root / "release").unlink(missing_ok=True)


class Follower:
    """``fleetsched tasks output TASK --follow ...`` as a process; its stdout lines queued."""

    def __init__(self, cli: Cli, tmp: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
        env |= {"XDG_CONFIG_HOME": str(tmp / "config"), "XDG_STATE_HOME": str(tmp / "state"),
                "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "scheduler", "--redis-url", cli.redis_url,
             "--database-url", cli.database_url, "tasks", "output", *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, wanted: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while wanted not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and self.lines.empty():
                raise AssertionError(f"{wanted!r} not shown; shown: {self.seen}\n"
                                     f"{self.stderr() if self.proc.poll() is not None else ''}")
            try:
                self.seen.append(self.lines.get(timeout=min(left, 0.5)))
            except queue.Empty:
                pass

    def finish(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout)
        time.sleep(0.1)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def test_follow_shows_each_hosts_lines_while_the_job_runs_masked_then_the_record_after(
        pipeline, ssh_fleet: SshFleet, tmp_path: Path, redis_client: redis.Redis) -> None:
    cli, worker, ssh = pipeline
    hosts = ssh_fleet.hosts[:2]
    # Given a task on two hosts whose command prints a line, a secret in it, then blocks
    task = cli.submit("command", "-t", ",".join(h.name for h in hosts), "-p", CMD, *ssh)
    worker.start()
    follower = Follower(cli, tmp_path, str(task), "--follow")
    late = None
    try:
        # When the follower runs while the jobs block: each host's first line shows, masked
        for h in hosts:
            follower.wait_for(f"{h.name} | first on {h.name} token=***", timeout=60)
        # Then the jobs have not ended: the lines came live
        running = sql_rows(cli.database_url, "SELECT state FROM jobs WHERE task_id = :t",
                           t=task)
        assert all(r.state not in ("succeeded", "failed") for r in running), running
        assert not any((h.root / "release").exists() for h in hosts)
        # And a late follower of one host alone sees that host's earlier line first, only his
        late = Follower(cli, tmp_path, str(task), "--follow", "--host", hosts[1].name)
        late.wait_for(f"{hosts[1].name} | first on {hosts[1].name} token=***")
        # And a follower stopped with Ctrl-C exits at once, cleanly (the jobs go on)
        stopped = Follower(cli, tmp_path, str(task), "--follow")
        stopped.wait_for(f"{hosts[0].name} | first on {hosts[0].name} token=***")
        stopped.proc.send_signal(signal.SIGINT)
        assert stopped.finish(10) == 130
        assert "Traceback" not in stopped.stderr()
        stopped.stop()
        # And the secret never reached Redis: the stream holds the masked line
        stream = redis_client.xrange(KEYS.output(str(task)))
        assert stream and SECRET not in repr(stream)
        assert any(f"first on {hosts[0].name} token=***" in f.get("d", "") for _, f in stream)
        # When the jobs are released
        for h in hosts:
            (h.root / "release").write_text("")
        # Then the followers show the rest (stderr marked) and exit as `tasks wait` would: 0
        assert follower.finish() == 0, follower.stderr()
        for h in hosts:
            assert f"{h.name} | [stderr] second on {h.name}" in follower.seen
            assert follower.seen.index(f"{h.name} | first on {h.name} token=***") \
                < follower.seen.index(f"{h.name} | last on {h.name}")
        assert SECRET not in "\n".join(follower.seen)
        assert late.finish() == 0
        # (stdout and stderr are two streams: their order between them is the channel's)
        assert late.seen[0] == f"{hosts[1].name} | first on {hosts[1].name} token=***"
        assert sorted(late.seen[1:]) == [f"{hosts[1].name} | [stderr] second on {hosts[1].name}",
                                         f"{hosts[1].name} | last on {hosts[1].name}"]
    finally:
        follower.stop()
        if late is not None:
            late.stop()
    # And the node gave the ended task's stream a minute, no more
    ttl = redis_client.ttl(KEYS.output(str(task)))
    assert 0 < ttl <= 60, ttl
    # When the stream is gone (its minute passed), --follow prints the recorded output
    redis_client.delete(KEYS.output(str(task)))
    wait_until(lambda: all(r.state == "succeeded" for r in sql_rows(
        cli.database_url, "SELECT state FROM jobs WHERE task_id = :t", t=task)), 30,
        "the record", worker.tail, [worker])
    code, out, err = cli("tasks", "output", str(task), "--follow", "--host", hosts[0].name)
    assert code == 0, err
    assert out.splitlines() == [f"{hosts[0].name} | first on {hosts[0].name} token=***",
                                f"{hosts[0].name} | last on {hosts[0].name}",
                                f"{hosts[0].name} | [stderr] second on {hosts[0].name}"]
    assert "recorded output follows" in err


def test_follow_refuses_an_unknown_task_or_host_and_failed_in_one_line(pipeline) -> None:
    cli, _worker, ssh = pipeline
    task = cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--in", "1h", *ssh)
    code, _out, err = cli("tasks", "output", "999999", "--follow")
    assert code == 4 and "no task 999999" in err and "Traceback" not in err
    code, _out, err = cli("tasks", "output", str(task), "--follow", "--host", "web-99")
    assert code == 4 and "no job of host 'web-99'" in err
    code, _out, err = cli("tasks", "output", str(task), "--follow", "--failed")
    assert code == 2 and "cannot be followed" in err
    code, _out, err = cli("tasks", "output", str(task), "--follow", "--grep", "(")
    assert code == 2 and "not a regular expression" in err


def test_submit_follow_submits_then_prints_the_lines_and_exits_as_wait_would(pipeline) -> None:
    cli, worker, ssh = pipeline
    worker.start()
    code, out, err = cli("submit", "command", "-t", "web-03", "-p",
                         "cmd=sh -c 'echo started; echo broken >&2; exit 3'", "--retries", "0",
                         *ssh, "--follow", "--yes")
    # the task id first, as submit always prints it, then the host's lines; exit 3: it failed
    assert code == 3, err
    task, *lines = out.splitlines()
    assert task.isdigit()
    assert sorted(lines) == ["web-03 | [stderr] broken", "web-03 | started"]
    assert f"task {task}: failed" in err


def test_follow_gives_up_after_its_timeout_as_wait_does_with_no_worker_running(
        pipeline) -> None:
    cli, _worker, ssh = pipeline  # the node never starts: nothing would ever end the task
    task = cli.submit("command", "-t", "web-01", "-p", "cmd=true", *ssh)
    # tasks output --follow --timeout: one line and exit 1 once the time is up, as tasks wait
    started = time.monotonic()
    code, out, err = cli("tasks", "output", str(task), "--follow", "--timeout", "2s")
    took = time.monotonic() - started
    assert code == 1 and out == "", err
    assert err.splitlines() == [f"error: task {task} not finished after 2s: 1 job waiting",
                                f"hint: follow again, or wait: fleetsched tasks wait {task}"]
    assert 2.0 <= took < 15.0
    code, _out, wait_err = cli("tasks", "wait", str(task), "--timeout", "2s")
    assert code == 1 and wait_err.splitlines()[0] == err.splitlines()[0]
    # submit --follow --wait-timeout: the same, after the task id
    code, out, err = cli("submit", "command", "-t", "web-02", "-p", "cmd=true", *ssh,
                         "--follow", "--wait-timeout", "2s", "--yes")
    assert code == 1, err
    assert out.strip().isdigit()
    assert f"error: task {out.strip()} not finished after 2s: 1 job waiting" in err.splitlines()
    # A bad timeout is one line, exit 2, before anything is queued; --timeout needs --follow
    before = cli("tasks", "list", "-o", "json")[1]
    code, out, err = cli("submit", "command", "-t", "web-02", "-p", "cmd=true", *ssh,
                         "--follow", "--wait-timeout", "soon", "--yes")
    assert code == 2 and out == "" and "--wait-timeout" in err and "Traceback" not in err
    assert cli("tasks", "list", "-o", "json")[1] == before
    code, _out, err = cli("tasks", "output", str(task), "--timeout", "2s")
    assert code == 2 and "--timeout is for --follow" in err


def test_a_task_whose_last_job_printed_nothing_still_gives_its_stream_a_minute(
        pipeline, ssh_fleet: SshFleet, redis_client: redis.Redis) -> None:
    # The reviewer's repro: the first host prints and ends, the second prints nothing and ends
    # last; the task's end comes with the second's, which published nothing
    cli, worker, ssh = pipeline
    hosts = ssh_fleet.hosts[:2]
    script = f'if [ "$1" = {hosts[0].name} ]; then echo "printed on $1"; else sleep 3; fi'
    task = cli.submit("command", "-t", ",".join(h.name for h in hosts), "-p",
                      f"cmd=sh -c '{script}' sh {{host.name}}", *ssh)
    worker.start()
    key = KEYS.output(str(task))
    wait_until(lambda: redis_client.exists(key), 60, "the first host's line", worker.tail,
               [worker])
    wait_until(lambda: redis_client.hget(KEYS.task(str(task)), "succeeded") == "2", 60,
               "both jobs", worker.tail, [worker])
    wait_until(lambda: 0 < redis_client.ttl(key) <= 60, 10,
               f"the stream's minute (ttl {redis_client.ttl(key)})", worker.tail, [worker])
