"""``fleetsched top --once``, ``tasks watch``, ``hosts history`` and ``tasks show --events``
on a real Redis and SQLite, with tasks submitted through ``scheduler.submission.submit`` and run by a real
worker process (``python -m scheduler worker``, the simulate executor).

The tests whose tasks run share one worker node on the module's fleet (``served``: its own
redis-server and record), each on tasks of its own; starting and stopping a node for each test
took most of its time. The others, which need no worker to run, have a fleet of their own
(``fleet``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler.inventory import import_inventory
from scheduler.queue.keys import Keys
from scheduler.record.engine import make_engine
from scheduler.record.migrate import upgrade
from scheduler.submission.submit import TaskRequest, submit
from tests.cli_support import isolated_env, run_cli
from tests.servers import start_redis, stop_process

HOSTS = [f"web-{i:02d}" for i in range(1, 7)]
# The module's fleet and worker node are made once, on the process that runs all of its tests.
pytestmark = pytest.mark.xdist_group("cli-views")


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> dict:
    """Six hosts imported into a fresh SQLite record, and no worker; env for the CLI."""
    return _fleet(tmp_path, redis_url)


def _fleet(tmp_path: Path, redis_url: str) -> dict:
    """Six hosts imported into a fresh SQLite record; env for the CLI and for workers."""
    db = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(db)
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[web]\n" + "\n".join(HOSTS) + "\n")
    engine = make_engine(db)
    import_inventory(engine, inventory, operator="tester")
    engine.dispose()
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db)
    return {"db": db, "redis_url": redis_url, "env": env, "tmp": tmp_path}


def submit_task(fleet: dict, *, failure_rate: float = 0.0, duration_ms: int = 50,
                target: str = "group:web", operator: str = "alice") -> int:
    engine = make_engine(fleet["db"])
    request = TaskRequest(action="command", target=target, params={"cmd": "uptime"},
                          executor="simulate", retries=0,
                          executor_options={"duration_ms": duration_ms,
                                            "failure_rate": failure_rate})
    try:
        done = submit(engine, lambda: redis.Redis.from_url(fleet["redis_url"], decode_responses=True),
                      request, operator=operator, keys=Keys())
    finally:
        engine.dispose()
    return done.task_id


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The module's fleet (a redis-server of its own: the session one is flushed before every
    test) with a worker node running on it (4 slots, its recorder)."""
    tmp = tmp_path_factory.mktemp("served")
    server = start_redis(tmp_path_factory.mktemp("served-redis"))
    try:
        fleet = _fleet(tmp, server.url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
        env.update({k: v for k, v in fleet["env"].items() if v is not None})
        with open(tmp / "worker.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-P", "-m", "scheduler", "worker",
                                     "--slots", "4", "--processes", "1", "--grace", "2s"],
                                    env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield fleet
        finally:
            stop_process(proc)
    finally:
        server.stop()


def test_top_once_counts_due_jobs_and_shows_each_task(fleet: dict) -> None:
    # Given one task of six jobs and no worker
    task = submit_task(fleet)
    # When top prints one frame as JSON
    code, out, err = run_cli(["top", "--once", "--output", "json"], fleet["env"])
    assert code == 0, err
    frame = json.loads(out)
    # Then the six jobs are due and pending in that task
    assert frame["due_now"] == 6 and frame["running"] == 0 and frame["later"] == 0
    assert [(t["task_id"], t["total"], t["pending"], t["operator"]) for t in frame["tasks"]] == \
        [(str(task), 6, 6, "alice")]
    assert frame["workers"] == []
    code, out, _ = run_cli(["top", "--once"], fleet["env"])
    assert "due 6" in out and f"{task} alice command" in out
    assert "\x1b[" not in out


def test_top_once_shows_the_last_fair_share_reorder(fleet: dict, redis_client: redis.Redis) -> None:
    now_ms = int(time.time() * 1000)
    redis_client.hset(Keys().stats, mapping={"reorder_at": now_ms - 3000, "reorder_jobs": 120,
                                             "reorder_tasks": 2, "reorder_count": 5})
    code, out, _ = run_cli(["top", "--once"], fleet["env"])
    assert code == 0
    line = next(ln for ln in out.splitlines() if "last reorder" in ln)
    assert re.search(r"last reorder [34]\.\ds ago", line), line
    assert "120 jobs of 2 tasks interleaved, 5 so far" in line


def test_top_refuses_csv_and_json_without_once(fleet: dict) -> None:
    assert run_cli(["top", "--output", "csv"], fleet["env"])[0] == 2
    code, _, err = run_cli(["top", "--output", "json"], fleet["env"])
    assert code == 2 and "--once" in err


def test_tasks_watch_ends_with_the_task_and_exits_0_when_every_job_succeeded(served: dict) -> None:
    task = submit_task(served)
    code, out, err = run_cli(["tasks", "watch", str(task), "--interval", "0.1", "--timeout", "60s",
                              "--output", "json"], served["env"])
    assert code == 0, err
    assert json.loads(out) == [{"task": str(task), "state": "succeeded", "total": 6,
                                "succeeded": 6, "failed": 0, "lost": 0, "cancelled": 0,
                                "running": 0, "pending": 0, "done": 6,
                                "running_hosts": [], "failures": []}]
    assert "6/6" in err  # the last frame of the bars (stderr: progress)


def test_tasks_watch_lists_each_failure_and_exits_3(served: dict) -> None:
    # Given a task whose every job fails (simulated) with no retry
    task = submit_task(served, failure_rate=1.0)
    code, out, err = run_cli(["tasks", "watch", str(task), "--interval", "0.1", "--timeout", "60s"],
                             served["env"])
    # Then each failure is listed once, with its host, and the exit code says "jobs failed"
    assert code == 3, err
    fail_lines = [ln for ln in err.splitlines() if ln.lstrip().startswith("fail ")]
    assert sorted(ln.split(" on ")[1].split()[0] for ln in fail_lines) == HOSTS
    assert " failed " in out.splitlines()[-1]  # every job failed: the task failed
    # And under each failure, the last lines its host printed
    for host in HOSTS:
        assert f"       {host}: [stderr] [simulated] failure" in err


def test_tasks_watch_of_an_unknown_task_exits_4(fleet: dict) -> None:
    code, out, err = run_cli(["tasks", "watch", "4242"], fleet["env"])
    assert code == 4 and out == "" and err.startswith("error: no task 4242")


def test_tasks_watch_gives_up_after_its_timeout(fleet: dict) -> None:
    task = submit_task(fleet)  # no worker: it never finishes
    code, _out, err = run_cli(["tasks", "watch", str(task), "--timeout", "0.5s", "--interval", "0.1"],
                              fleet["env"])
    [line] = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert code == 1 and line == f"error: task {task} not finished after 0.5s: 6 jobs waiting", err


def test_hosts_history_and_tasks_show_events_give_the_full_trail(served: dict) -> None:
    task = submit_task(served, target="web-03")
    assert run_cli(["tasks", "watch", str(task), "--timeout", "60s"], served["env"])[0] == 0
    deadline = time.monotonic() + 20
    while True:  # the recorder copies the events into SQL within moments
        code, out, err = run_cli(["hosts", "history", "web-03", "--output", "json"], served["env"])
        # the host's events of this task (the module's other tasks run on web-03 too)
        events = [e for e in json.loads(out) if e["task"] == str(task)] if code == 0 else []
        kinds = [e["kind"] for e in events]
        if "ack" in kinds or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert code == 0, err
    assert kinds.index("claim") < kinds.index("ack")
    ack = events[kinds.index("ack")]
    assert ack["job"] == f"{task}.0" and ack["exit_code"] == 0 and ack["worker"]
    code, out, err = run_cli(["tasks", "show", str(task), "--events", "--output", "json"],
                             served["env"])
    assert code == 0, err
    trail = json.loads(out)["events"]
    assert {"create", "enqueue", "claim", "ack"} <= {e["kind"] for e in trail}
    assert [e["ts"] for e in trail] == sorted(e["ts"] for e in trail)


def test_hosts_history_of_an_unknown_host_exits_4(fleet: dict) -> None:
    code, _out, err = run_cli(["hosts", "history", "nope-99"], fleet["env"])
    assert code == 4 and "nope-99" in err


def test_jobs_show_and_tasks_output_give_each_attempt_and_what_each_host_printed(
        served: dict) -> None:
    # Given a task whose every job failed (simulated), recorded by the worker's recorder
    fleet = served
    task = submit_task(fleet, failure_rate=1.0)
    code, _, err = run_cli(["tasks", "watch", str(task), "--interval", "0.1", "--timeout", "60s"],
                           fleet["env"])
    assert code == 3, err
    # When the operator looks at one job
    code, out, err = run_cli(["jobs", "show", f"{task}.0"], fleet["env"])
    # Then its host, its attempt with worker, token and end, the command and what it printed
    assert code == 0, err
    assert out.startswith(f"job {task}.0 on web-01: failed")
    assert "attempt 1 (token 1) on " in out and ": failed, exit code 1" in out
    assert "$ uptime" in out and "[simulated]" in out
    code, out, _ = run_cli(["jobs", "show", f"{task}.0", "--output", "json"], fleet["env"])
    attempt = json.loads(out)["attempts"][0]
    assert (attempt["end"], attempt["exit_code"], attempt["token"]) == ("failed", 1, 1)
    assert attempt["commands"][0]["command"] == "uptime"
    # And every host's output of the task, prefixed by the host, filtered by a pattern
    code, out, err = run_cli(["tasks", "output", str(task), "--failed", "--grep", "simulated"],
                             fleet["env"])
    assert code == 0, err
    heads = [ln for ln in out.splitlines() if " | failed | rc=1 | " in ln]
    assert sorted(ln.split(" | ")[0] for ln in heads) == HOSTS
    body = [ln for ln in out.splitlines() if " | " not in ln]
    assert body and all(ln.split(": ", 1)[0] in HOSTS and "simulated" in ln for ln in body)
    code, out, _ = run_cli(["tasks", "output", str(task), "--host", "web-02", "--output", "json"],
                           fleet["env"])
    [row] = json.loads(out)
    assert row["host"] == "web-02" and row["exit_code"] == 1 and row["lines"]
    # Bad input: one line, the right exit code
    code, _, err = run_cli(["tasks", "output", str(task), "--grep", "("], fleet["env"])
    assert code == 2 and err.startswith("error: --grep '(' is not a regular expression")
    code, _, err = run_cli(["jobs", "show", "999.0"], fleet["env"])
    assert code == 4 and err.startswith("error: no job '999.0'")


def test_tasks_wait_blocks_until_the_end_lists_each_failed_host_and_exits_3(
        served: dict) -> None:
    fleet = served
    task = submit_task(fleet, failure_rate=1.0, target="web-01,web-02")
    code, _out, err = run_cli(["tasks", "wait", str(task), "--timeout", "60s"], fleet["env"])
    assert code == 3, err
    failed = [ln for ln in err.splitlines() if " | failed | rc=1 | job " in ln]
    assert sorted(ln.split(" | ")[0] for ln in failed) == ["web-01", "web-02"]
    assert f"task {task}: failed: 0 of 2 succeeded, 2 failed, 0 cancelled" in err
    ok = submit_task(fleet, target="web-03")
    code, _, err = run_cli(["tasks", "wait", str(ok)], fleet["env"])
    assert code == 0 and f"task {ok}: succeeded: 1 of 1 succeeded" in err


def test_submit_wait_returns_when_the_task_ends_with_its_exit_code(served: dict) -> None:
    fleet = served
    client = redis.Redis.from_url(fleet["redis_url"])
    deadline = time.monotonic() + 30
    while not client.hlen(Keys().workers) and time.monotonic() < deadline:
        time.sleep(0.05)  # the node's first heartbeat: it is alive from then on
    client.close()
    code, out, err = run_cli(["submit", "command", "-t", "web-04", "-p", "cmd=true",
                              "--executor", "simulate", "--wait", "--wait-timeout", "60s"],
                             fleet["env"])
    assert code == 0, err
    assert out.strip().isdigit() and "succeeded: 1 of 1 succeeded" in err
    assert "no live worker" not in err
    code, _, err = run_cli(["tasks", "wait", "4242"], fleet["env"])
    assert code == 4 and err.startswith("error: no task 4242")


def test_submit_without_a_live_worker_is_accepted_and_says_so(fleet: dict) -> None:
    code, out, err = run_cli(["submit", "command", "-t", "web-05", "-p", "cmd=true",
                              "--executor", "simulate"], fleet["env"])
    assert code == 0 and out.strip().isdigit()
    assert ("warning: no live worker serves this queue: the task waits until one starts "
            "(`fleetsched worker`") in err
    code, out, _ = run_cli(["tasks", "show", out.strip(), "-o", "json"], fleet["env"])
    assert code == 0 and json.loads(out)["pending"] == 1


def test_tasks_wait_timeout_says_the_timeout_given_and_that_the_jobs_are_waiting(
        fleet: dict) -> None:
    # Given a task whose one job waits (no worker runs)
    task = submit_task(fleet, target="web-06")
    # When the operator waits for it with a timeout
    code, _, err = run_cli(["tasks", "wait", str(task), "--timeout", "1s"], fleet["env"])
    # Then it gives up with the timeout as given, saying the job waits, not that it runs
    assert code == 1, err
    assert err.splitlines()[0] == f"error: task {task} not finished after 1s: 1 job waiting", err
