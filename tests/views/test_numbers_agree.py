"""Every view says the same numbers: a task driven to each final state, then ``tasks show``,
``tasks watch --once``, ``top --once``, ``report``, ``tasks list`` and the SQL job rows are
compared, and ``tasks wait`` exits with the code its end calls for.

Real redis-server and SQLite; jobs are claimed, acknowledged, failed, released and lost through
the real ``Queue`` (as a worker would), the recorder folds the events into SQL, and the CLI
reads both. One source for every number (``scheduler.progress``) is what this checks, and its
rule (docs/reliability.md, section 12): each job is counted once, ``failed`` by its host and
``lost`` with its worker side by side, in the live views (Redis), the record's views (SQL), the
notices and ``schedules show``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import JobResult, Queue
from scheduler.record.migrate import upgrade
from tests.submit_support import KEYS, Cli, drain, inventory, sql_rows

HOSTS = 4


@dataclass(frozen=True)
class End:
    """What every view must say at the end (``failed``: by the host; ``lost``: with the worker,
    beside ``failed``, never in it)."""

    state: str
    succeeded: int
    failed: int
    cancelled: int
    exit_code: int
    lost: int = 0


def _succeeded(q: Queue, cli: Cli, task: int) -> None:
    jobs = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in jobs])


def _failed(q: Queue, cli: Cli, task: int) -> None:
    jobs = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in jobs[:2]])
    for j in jobs[2:]:
        q.fail_job("w1", j.job_id, j.token, JobResult(1), error="exit 1", retryable=False)


def _lost(q: Queue, cli: Cli, task: int) -> None:
    # The command action is not idempotent by default: the two jobs whose worker vanished fail as lost, never run again.
    jobs = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in jobs[:2]])
    q.extend("w1", [(j.job_id, j.token) for j in jobs[2:]], lease_ms=1)
    time.sleep(0.02)
    assert q.claim("w2", HOSTS).jobs == []


def _lost_and_failed(q: Queue, cli: Cli, task: int) -> None:
    # One job succeeds, one fails on its host, two are lost with their worker (not idempotent).
    jobs = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(jobs[0].job_id, jobs[0].token, JobResult(0))])
    q.fail_job("w1", jobs[1].job_id, jobs[1].token, JobResult(1), error="exit 1",
               retryable=False)
    q.extend("w1", [(j.job_id, j.token) for j in jobs[2:]], lease_ms=1)
    time.sleep(0.02)
    assert q.claim("w2", HOSTS).jobs == []


def _cancelled(q: Queue, cli: Cli, task: int) -> None:
    [job] = q.claim("w1", 1).jobs
    q.ack("w1", [(job.job_id, job.token, JobResult(0))])
    cli.ok("tasks", "cancel", str(task))


def _aborted(q: Queue, cli: Cli, task: int) -> None:
    # --max-failures 1: the first failure aborts; the job already running still succeeds.
    a, b = q.claim("w1", 2).jobs
    assert q.fail_job("w1", a.job_id, a.token, JobResult(1), error="exit 1",
                      retryable=False).aborted
    q.ack("w1", [(b.job_id, b.token, JobResult(0))])
    q.sweep_aborted(str(task))


def _interrupted(q: Queue, cli: Cli, task: int) -> None:
    # A worker stopped (SIGTERM) gives its running jobs back; another runs them.
    jobs = q.claim("w1", HOSTS).jobs
    q.release("w1", [(j.job_id, j.token) for j in jobs])
    jobs = q.claim("w2", HOSTS).jobs
    q.ack("w2", [(j.job_id, j.token, JobResult(0)) for j in jobs])


def _retried(q: Queue, cli: Cli, task: int) -> None:
    # One job failed for good, then the operator's retry-failed runs it again and it succeeds.
    jobs = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in jobs[1:]])
    q.fail_job("w1", jobs[0].job_id, jobs[0].token, JobResult(1), error="exit 1",
               retryable=False)
    cli.ok("tasks", "retry-failed", str(task))
    [again] = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(again.job_id, again.token, JobResult(0))])


def _stale_acked(q: Queue, cli: Cli, task: int) -> None:
    # w1's leases run out; w2 runs the jobs again; w1's late acknowledgement is refused.
    first = q.claim("w1", HOSTS, lease_ms=1).jobs
    time.sleep(0.02)
    second = q.claim("w2", HOSTS).jobs
    assert len(second) == HOSTS and all(j.after_loss for j in second)
    q.ack("w2", [(j.job_id, j.token, JobResult(0)) for j in second])
    codes = q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in first])
    assert all(c != 0 for c in codes)


SCENARIOS: dict[str, tuple[list[str], Callable[[Queue, Cli, int], None], End]] = {
    "succeeded": ([], _succeeded, End("succeeded", 4, 0, 0, 0)),
    "failed": ([], _failed, End("failed", 2, 2, 0, 3)),
    "lost": ([], _lost, End("failed", 2, 0, 0, 3, lost=2)),
    "lost-and-failed": ([], _lost_and_failed, End("failed", 1, 1, 0, 3, lost=2)),
    "cancelled": ([], _cancelled, End("cancelled", 1, 0, 3, 5)),
    "aborted": (["--max-failures", "1"], _aborted, End("aborted", 1, 1, 2, 3)),
    "interrupted": ([], _interrupted, End("succeeded", 4, 0, 0, 0)),
    "retried": (["--retries", "0"], _retried, End("succeeded", 4, 0, 0, 0)),
    "stale-acked": (["--idempotent", "--retries", "2"], _stale_acked, End("succeeded", 4, 0, 0, 0)),
}


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, f"[fleet]\nn-[00:{HOSTS - 1:02d}]\n")
    return cli


def _json(cli: Cli, *args: str) -> tuple[int, object]:
    code, out, err = cli(*args, "--output", "json")
    assert code in (0, 3, 5), f"fleetsched {' '.join(args)} exited {code}: {err}"
    return code, json.loads(out)


NUMBERS = ("state", "total", "succeeded", "failed", "lost", "cancelled", "running", "pending")


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_view_says_the_same_numbers(scenario: str, cli: Cli,
                                          redis_client: redis.Redis) -> None:
    options, drive, end = SCENARIOS[scenario]
    # Given a task of 4 hosts driven to its end
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      *options)
    drive(Queue(redis_client, KEYS, lease_ms=30_000), cli, task)
    drain(redis_client, cli.database_url)
    expected = {"state": end.state, "total": HOSTS, "succeeded": end.succeeded,
                "failed": end.failed, "lost": end.lost, "cancelled": end.cancelled,
                "running": 0, "pending": 0}

    # The SQL record, counted here without fleetsched's code: each job in its one state.
    states = Counter(dict(sql_rows(cli.database_url, "SELECT state, COUNT(*) FROM jobs "
                                   "WHERE task_id = :t GROUP BY state", t=task)))
    assert (states["succeeded"], states["failed"], states["lost"], states["cancelled"],
            sum(states.values())) == (end.succeeded, end.failed, end.lost, end.cancelled, HOSTS)

    # tasks show: live counters and the SQL job rows behind them agree
    _, shown = _json(cli, "tasks", "show", str(task))
    assert {k: shown[k] for k in NUMBERS} == expected
    assert shown["summary"].startswith(f"{end.state}: {end.succeeded} of {HOSTS} succeeded, "
                                       f"{end.failed} failed")

    # tasks watch --once, top --once, report, tasks list
    code, [watched] = _json(cli, "tasks", "watch", str(task), "--once")
    assert {k: watched[k] for k in NUMBERS} == expected and code == end.exit_code
    _, frame = _json(cli, "top", "--once")
    [top_row] = [t for t in frame["tasks"] if t["task_id"] == str(task)]
    assert {k: top_row[k] for k in NUMBERS} == expected
    _, report = _json(cli, "report", "--task", str(task))
    [summary] = report["tasks"]
    assert {k: summary[k] for k in NUMBERS if k != "total"} == {
        k: v for k, v in expected.items() if k != "total"}
    assert summary["jobs"] == HOSTS and summary["lost"] == end.lost
    assert (report["totals"]["failed"], report["totals"]["lost"]) == (end.failed, end.lost)
    _, listed = _json(cli, "tasks", "list")
    [row] = [r for r in listed if r["id"] == task]
    assert {k: row[k] for k in NUMBERS} == expected

    # tasks wait: the exit code of the end, at once
    code, _out, err = cli("tasks", "wait", str(task), "--timeout", "10s")
    assert code == end.exit_code, err


def test_status_top_and_recorder_status_say_the_same_recorder_lag(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given events in the stream, some recorded, some read but not committed, some unread
    cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate")
    drain(redis_client, cli.database_url)
    q = Queue(redis_client, KEYS)
    jobs = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in jobs])
    redis_client.xreadgroup("recorder", "stuck", {KEYS.events: ">"}, count=2)
    # When status, top and recorder status read the lag
    _, status = _json(cli, "status")
    [recorder] = [c for c in status["checks"] if c["check"] == "recorder"]
    _, frame = _json(cli, "top", "--once")
    _, rec = _json(cli, "recorder", "status")
    # Then they agree, on the unread and the pending entries alike
    unrecorded = HOSTS * 2  # a claim and an ack per job
    assert (recorder["data"]["lag"], frame["recorder_lag"], rec["lag"]) == (unrecorded,) * 3
    assert (recorder["data"]["pending"], frame["recorder_pending"], rec["pending"]) == (2,) * 3


def _fail_one_then_succeed_the_rest(cli: Cli, redis_client: redis.Redis) -> tuple[int, str, str]:
    """A task of 4 hosts whose first job fails, recorded; the rest succeed a moment later.
    (task id, the failed host, a time between the failure and the successes)"""
    from datetime import UTC, datetime

    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--retries", "0")
    q = Queue(redis_client, KEYS, lease_ms=30_000)
    jobs = q.claim("w1", HOSTS).jobs
    q.fail_job("w1", jobs[0].job_id, jobs[0].token, JobResult(1), error="exit 1",
               retryable=False)
    drain(redis_client, cli.database_url)
    time.sleep(0.05)
    between = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in jobs[1:]])
    drain(redis_client, cli.database_url)
    return task, jobs[0].host, between


def test_a_report_that_leaves_out_the_failed_job_still_says_the_task_failed(
        cli: Cli, redis_client: redis.Redis, tmp_path: Path) -> None:
    # Given a task of 4 jobs, one failed
    task, failed_host, between = _fail_one_then_succeed_the_rest(cli, redis_client)
    other = next(h for h in (f"n-{i:02d}" for i in range(HOSTS)) if h != failed_host)
    # When each filter leaves the failed job out of the report
    for cut, selected in ((("--host", other), 1),
                          (("--task", str(task), "--state", "succeeded"), 3),
                          (("--since", between), 3)):
        _, report = _json(cli, "report", *cut)
        [summary] = report["tasks"]
        # Then the state is the whole task's, the counts those of the selected jobs, and it says so
        assert summary["state"] == "failed", cut
        assert (summary["jobs"], summary["task_jobs"], summary["succeeded"],
                summary["failed"]) == (selected, HOSTS, selected, 0), cut
        assert report["note"] and "counts are of the jobs this report selects" in report["note"]
        code, table, err = cli("report", *cut)
        assert code == 0, err
        assert "note: counts are of the jobs this report selects" in table
        assert " failed " in table.split("Tasks\n", 1)[1].splitlines()[1]
    html = tmp_path / "report.html"
    cli.ok("report", "--host", other, "--html", str(html))
    assert "counts are of the jobs this report selects" in html.read_text()
    # The unfiltered report of the task: every job, no note
    _, report = _json(cli, "report", "--task", str(task))
    [summary] = report["tasks"]
    assert (summary["state"], summary["jobs"], summary["failed"]) == ("failed", HOSTS, 1)
    assert report["note"] is None


def _forget_in_redis(client: redis.Redis) -> None:
    """Redis loses the queue's keys (flushed, or restored from an old snapshot): a delete scoped
    to the test's key prefix."""
    pattern = KEYS.task("")[:KEYS.task("").index("}") + 1]
    pattern = pattern.replace("{", "\\{").replace("}", "\\}") + "*"
    keys = list(client.scan_iter(match=pattern, count=1000))
    assert keys
    client.delete(*keys)
    assert not list(client.scan_iter(match=pattern))


def test_wait_and_watch_read_the_record_of_a_task_redis_forgot(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a task that ended with one failure, recorded, and one that never ran; Redis forgets both
    task, failed_host, _ = _fail_one_then_succeed_the_rest(cli, redis_client)
    unended = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate")
    drain(redis_client, cli.database_url)
    _forget_in_redis(redis_client)
    expected = {"state": "failed", "total": HOSTS, "succeeded": HOSTS - 1, "failed": 1,
                "lost": 0, "cancelled": 0, "running": 0, "pending": 0}

    # When watch --once, watch and wait read it: the record's numbers, the exit code of its end
    code, [watched] = _json(cli, "tasks", "watch", str(task), "--once")
    assert ({k: watched[k] for k in NUMBERS}, code) == (expected, 3)
    code, [watched] = _json(cli, "tasks", "watch", str(task), "--interval", "0.1")
    assert ({k: watched[k] for k in NUMBERS}, code) == (expected, 3)
    code, _out, err = cli("tasks", "wait", str(task), "--timeout", "10s")
    assert code == 3, err
    assert f"task {task}: failed: {HOSTS - 1} of {HOSTS} succeeded, 1 failed" in err
    assert f"{failed_host} | failed | rc=1" in err
    # ... as tasks show and tasks list do
    _, shown = _json(cli, "tasks", "show", str(task))
    assert {k: shown[k] for k in NUMBERS} == expected

    # A task the record says has not ended: watch --once prints it; wait cannot end, and says why
    code, [watched] = _json(cli, "tasks", "watch", str(unended), "--once")
    assert (watched["state"], watched["pending"], code) == ("active", HOSTS, 0)
    code, _out, err = cli("tasks", "wait", str(unended), "--timeout", "10s")
    assert code == 1 and "not in the queue" in err and "reconcile" in err, err

    # A task neither Redis nor the record knows: exit 4
    for args in (("tasks", "wait", "999"), ("tasks", "watch", "999", "--once"),
                 ("tasks", "watch", str(task), "999")):
        code, _out, err = cli(*args)
        assert code == 4 and "no task 999" in err, (args, err)


def test_show_list_and_report_say_when_the_record_is_behind_the_queue(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a task whose jobs all ended in the queue, one failed, none of it recorded yet
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--retries", "0")
    drain(redis_client, cli.database_url)
    q = Queue(redis_client, KEYS, lease_ms=30_000)
    jobs = q.claim("w1", HOSTS).jobs
    q.ack("w1", [(j.job_id, j.token, JobResult(0)) for j in jobs[1:]])
    q.fail_job("w1", jobs[0].job_id, jobs[0].token, JobResult(1), error="exit 1",
               retryable=False)
    behind = f"the SQL record is {HOSTS} job(s) behind the queue"

    # tasks show: the live numbers, and a note that failures are still to come
    _, shown = _json(cli, "tasks", "show", str(task))
    assert (shown["state"], shown["failed"], shown["record_behind"]) == ("failed", 1, HOSTS)
    assert shown["note"].startswith(behind) and shown["failures"] == []
    code, table, err = cli("tasks", "show", str(task))
    assert code == 0 and behind in " ".join(table.split()), err
    # tasks list and report read the record, and say on stderr that the queue is ahead
    for args in (("tasks", "list"), ("report", "--task", str(task))):
        code, _out, err = cli(*args)
        assert code == 0 and "the SQL record is behind the queue for task(s) " in err, args

    # When the recorder catches up, no note
    drain(redis_client, cli.database_url)
    _, shown = _json(cli, "tasks", "show", str(task))
    assert (shown["record_behind"], shown["note"], len(shown["failures"])) == (0, None, 1)
    code, table, err = cli("tasks", "show", str(task))
    assert code == 0 and "behind" not in table + err
    for args in (("tasks", "list"), ("report", "--task", str(task))):
        code, _out, err = cli(*args)
        assert code == 0 and "behind" not in err, args


# A task of 4 hosts, an occurrence of a schedule: 1 job succeeded, 1 failed on its host, 2 lost
# with their worker. Every view, the notice and `schedules show` say these numbers.
LOST_AND_FAILED = {"state": "failed", "total": HOSTS, "succeeded": 1, "failed": 1, "lost": 2,
                   "cancelled": 0, "running": 0, "pending": 0}
LOST_AND_FAILED_TEXT = "1 of 4 succeeded, 1 failed, 2 lost with their worker, 0 cancelled"


@dataclass(frozen=True)
class Occurrence:
    task: int
    notices: list[dict]  # the outbox rows' payloads, oldest first


@pytest.fixture
def lost_occurrence(cli: Cli, redis_client: redis.Redis) -> Occurrence:
    """The schedule `nightly` fires once; its task ends with 2 lost jobs and 1 failed one,
    recorded by a recorder with the notice detector (a global webhook target)."""
    import sqlalchemy as sa

    from scheduler.notify import Detector, Policy, parse_targets
    from scheduler.queue.schedules import arm
    from scheduler.record.models import Notification
    from scheduler.record.recorder import Recorder
    from tests.schedule_support import fired

    cli.ok("schedules", "add", "nightly", "--every", "1s", "command", "-t", "all", "-p",
           "cmd=true", "--executor", "simulate")
    occurrence = (int(time.time()) - 20) * 1000
    arm(redis_client, KEYS, "nightly", occurrence, replace=True)
    [fire] = fired(redis_client, cli.database_url, now_ms=occurrence + 100)
    cli.ok("schedules", "pause", "nightly")  # no other occurrence is claimed with the jobs
    [task] = fire.tasks
    _lost_and_failed(Queue(redis_client, KEYS, lease_ms=30_000), cli, task)
    engine = sa.create_engine(cli.database_url)
    try:
        policy = Policy(targets=parse_targets(["https://hooks.example.invalid/ops"]))
        recorder = Recorder(redis_client, engine, KEYS, "r-notices", on_batch=Detector(policy))
        while recorder.run_once(block_ms=None):
            pass
        with engine.connect() as conn:
            notices = [r.payload for r in conn.execute(
                sa.select(Notification.__table__).order_by(Notification.id))]
    finally:
        engine.dispose()
    return Occurrence(int(task), notices)


def _numbers(row: dict) -> dict:
    return {k: row[k] for k in NUMBERS}


def _cells(header: str, row: str) -> dict[str, str]:
    """A row of an aligned text table by its header's column names: the row's words that
    overlap each header word's span (left- or right-aligned cells alike)."""
    import re

    words = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", row)]
    return {m.group().lower(): " ".join(w for a, b, w in words if a < m.end() and b > m.start())
            for m in re.finditer(r"\S+", header)}


def test_a_task_with_two_lost_jobs_and_one_failed_says_1_failed_2_lost_in_every_json_view(
        cli: Cli, lost_occurrence: Occurrence) -> None:
    task = lost_occurrence.task
    # tasks show (live from Redis), tasks list (the SQL row), watch --once and top --once (Redis)
    _, shown = _json(cli, "tasks", "show", str(task))
    assert _numbers(shown) == LOST_AND_FAILED
    assert shown["summary"] == f"failed: {LOST_AND_FAILED_TEXT}"
    _, listed = _json(cli, "tasks", "list")
    assert _numbers(next(r for r in listed if r["id"] == task)) == LOST_AND_FAILED
    code, [watched] = _json(cli, "tasks", "watch", str(task), "--once")
    assert (_numbers(watched), code) == (LOST_AND_FAILED, 3)
    _, frame = _json(cli, "top", "--once")
    assert _numbers(next(t for t in frame["tasks"] if t["task_id"] == str(task))) == \
        LOST_AND_FAILED
    # report: the task's summary and the totals (SQL job rows)
    _, report = _json(cli, "report", "--task", str(task))
    [summary] = report["tasks"]
    assert {k: summary[k] for k in NUMBERS if k != "total"} == {
        k: v for k, v in LOST_AND_FAILED.items() if k != "total"}
    assert {k: report["totals"][k] for k in ("succeeded", "failed", "lost", "cancelled")} == {
        "succeeded": 1, "failed": 1, "lost": 2, "cancelled": 0}


def test_the_report_table_and_csv_of_that_task_count_the_lost_jobs_apart_from_the_failed(
        cli: Cli, lost_occurrence: Occurrence) -> None:
    import csv
    import io

    task = str(lost_occurrence.task)
    table = cli.ok("report", "--task", task)
    assert table.splitlines()[0].startswith(
        "4 job(s) in 1 task(s): 1 succeeded, 1 failed, 2 lost with their worker")
    header, row = table.split("Tasks\n", 1)[1].splitlines()[:2]
    cells = _cells(header, row)
    assert {k: cells[k] for k in ("state", "succeeded", "failed", "lost", "cancelled")} == {
        "state": "failed", "succeeded": "1", "failed": "1", "lost": "2", "cancelled": "0"}
    rows = list(csv.DictReader(io.StringIO(cli.ok("report", "--task", task, "--output", "csv"))))
    assert Counter(r["state"] for r in rows) == {"succeeded": 1, "failed": 1, "lost": 2}


def test_tasks_show_list_watch_and_top_tables_have_a_lost_column_beside_failed(
        cli: Cli, lost_occurrence: Occurrence) -> None:
    task = str(lost_occurrence.task)
    shown = cli.ok("tasks", "show", task)
    assert "total=4, succeeded=1, failed=1, lost=2, cancelled=0, running=0, pending=0" in shown
    assert LOST_AND_FAILED_TEXT in " ".join(shown.split())
    for args, first in ((("tasks", "list"), task), (("tasks", "watch", task, "--once"), task),
                        (("top", "--once"), task)):
        code, out, err = cli(*args)
        assert code in (0, 3), err
        lines = out.splitlines()
        [header] = [ln for ln in lines if "failed" in ln.split() and "lost" in ln.split()]
        names = header.split()
        assert names.index("lost") == names.index("failed") + 1, (args, header)
        [row] = [ln for ln in lines if ln.split()[:1] == [first]]
        values = _cells(header, row)
        assert (values["failed"], values["lost"]) == ("1", "2"), (args, out)


def test_tasks_wait_exits_3_and_names_the_lost_jobs_beside_the_failed_one(
        cli: Cli, lost_occurrence: Occurrence) -> None:
    code, _out, err = cli("tasks", "wait", str(lost_occurrence.task), "--timeout", "10s")
    assert code == 3, err
    assert f"task {lost_occurrence.task}: failed: {LOST_AND_FAILED_TEXT}" in err


def test_the_notice_of_that_task_counts_1_failed_and_2_lost_as_every_view_does(
        lost_occurrence: Occurrence) -> None:
    [failed] = [n for n in lost_occurrence.notices if n["kind"] == "failed"]
    assert failed["counts"] == {k: LOST_AND_FAILED[k] for k in (
        "total", "succeeded", "failed", "lost", "cancelled", "running")}
    assert failed["text"].startswith(
        f"[fleetsched] task {lost_occurrence.task} (schedule nightly) failed: command by tester, "
        f"{LOST_AND_FAILED_TEXT}; failed hosts: ")
    # The first job lost for good is told too, with the counts of that moment, in the same words
    [lost] = [n for n in lost_occurrence.notices if n["kind"] == "lost"]
    assert " has lost jobs: command by tester, 1 of 4 succeeded, 1 failed, 2 lost with their " \
        "worker, 0 cancelled" in lost["text"]


def test_schedules_show_counts_the_occurrences_lost_jobs_beside_its_failed_one(
        cli: Cli, lost_occurrence: Occurrence) -> None:
    _, info = _json(cli, "schedules", "show", "nightly")
    [occurrence] = info["tasks"]
    assert occurrence["task"] == lost_occurrence.task
    assert _numbers(occurrence) == LOST_AND_FAILED
    table = cli.ok("schedules", "show", "nightly")
    lines = table.split("latest tasks", 1)[1].splitlines()
    [header] = [ln for ln in lines if {"succeeded", "failed", "lost"} <= set(ln.split())]
    [row] = [ln for ln in lines if ln.split()[:1] == [str(lost_occurrence.task)]]
    values = _cells(header, row)
    assert (values["succeeded"], values["failed"], values["lost"]) == ("1", "1", "2"), table


def test_a_task_redis_forgot_counts_its_lost_jobs_apart_once_reconcile_recreates_it(
        cli: Cli, redis_client: redis.Redis) -> None:
    import sqlalchemy as sa

    from scheduler.queue.types import TaskSpec
    from scheduler.record.models import Task
    from scheduler.submission.reconcile import _carried

    # Given the task with 1 failed and 2 lost jobs, recorded, then forgotten by Redis
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate")
    q = Queue(redis_client, KEYS, lease_ms=30_000)
    _lost_and_failed(q, cli, task)
    drain(redis_client, cli.database_url)
    _forget_in_redis(redis_client)
    # When reconcile's step recreates its hash with what SQL says had ended
    engine = sa.create_engine(cli.database_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.select(Task.__table__).where(Task.id == task)).one()
        carried = _carried(engine, row, "ops")
    finally:
        engine.dispose()
    assert (carried.failed, carried.lost_failed, carried.failed_hosts) == (3, 2, 1)
    assert q.create_task(TaskSpec(str(task)), carried)
    # Then the live views count them as the record does, and no threshold counts the lost ones
    code, [watched] = _json(cli, "tasks", "watch", str(task), "--once")
    assert (_numbers(watched), code) == (LOST_AND_FAILED, 3)
    assert q.task_state(str(task))["lost_failed"] == "2"
