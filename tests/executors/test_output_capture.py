"""What a job printed is kept per attempt, capped, and always readable: head and tail of each
stream cut on character boundaries, the bytes cut counted and said in words, the stored value
valid JSON at every step (worker, queue event, SQL row), and the cap a setting.

The end-to-end test runs a real worker node against a real sshd host with
``FLEETSCHED_OUTPUT_CAP_BYTES=1024`` and reads the result back through ``jobs show`` and
``tasks output``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import JobResult, Queue
from scheduler.queue.output import output_lines
from scheduler.queue.types import OUTPUT_MAX, capped_output, stored_output
from scheduler.record.migrate import upgrade
from scheduler.redact import Redactor
from tasks.executors.capture import Capture
from tasks.host import CommandResult
from tests.fleet import SshFleet, current_user
from tests.submit_support import Cli, drain, inventory, sql_rows
from tests.worker_support import KEYS, WorkerProcess, worker_args
from workers.results import output_json

TEXT = "aé€😀" * 50  # 1, 2, 3 and 4-byte characters


@pytest.mark.parametrize("cap", [1, 2, 3, 4, 5, 7, 11, 64])
def test_head_and_tail_never_split_a_character_and_the_cut_adds_up(cap: int) -> None:
    data = TEXT.encode()
    for chunk in (1, 3, 7, len(data)):
        c = Capture(cap, cap)
        for i in range(0, len(data), chunk):
            c.feed(data[i:i + chunk])
        assert "\ufffd" not in c.head + c.tail
        assert data.startswith(c.head.encode()) and data.endswith(c.tail.encode())
        assert c.cut == len(data) - len(c.head.encode()) - len(c.tail.encode()) > 0


def test_output_json_is_valid_json_within_its_budget_and_counts_what_it_cut() -> None:
    kept_by_capture = 2 * len((TEXT * 40).encode())
    big = CommandResult(command="dump", exit_code=0, stdout_head=TEXT * 40, stdout_tail=TEXT * 40,
                        stdout_bytes=10_000_000, stdout_cut=10_000_000 - kept_by_capture,
                        stderr_head="warn\n", stderr_bytes=5)
    text = output_json([big] * 30, budget=20_000)
    records = json.loads(text)
    assert len(text) <= 20_000 and records
    for rec in records:
        kept = len(rec["stdout_head"].encode()) + len(rec["stdout_tail"].encode())
        assert rec["stdout_cut"] == 10_000_000 - kept
        assert "\ufffd" not in rec["stdout_head"] + rec["stdout_tail"]
    lines = output_lines(records[:1])
    [note] = [ln for ln in lines if ln.startswith("[... ")]
    assert note == (f"[... {records[0]['stdout_cut']:,} bytes cut here: the stdout had "
                    f"10,000,000 bytes, of which the first "
                    f"{len(records[0]['stdout_head'].encode()):,} and the last "
                    f"{len(records[0]['stdout_tail'].encode()):,} were kept ...]")


def _captured(data: bytes, secret: str | None = None, cap: int = 8192) -> dict:
    """What a worker records of a command that printed ``data`` (capture, masking, JSON)."""
    out = Capture(cap, cap)
    out.feed(data)
    result = CommandResult(command="c", exit_code=0, stdout_head=out.head, stdout_tail=out.tail,
                           stdout_bytes=out.total, stdout_cut=out.cut)
    if secret:
        result = Redactor([secret]).result(result)
    [record] = json.loads(output_json([result]))
    return record


def test_masking_a_secret_does_not_make_a_cut_appear() -> None:
    record = _captured(b"password is S3cretValue-0123456789 ok\n", "S3cretValue-0123456789")
    assert record["stdout_head"] == "password is *** ok\n" and "stdout_cut" not in record
    assert output_lines([record]) == ["password is *** ok"]


def test_binary_output_counts_the_bytes_really_cut() -> None:
    record = _captured(b"\xff" * 20_000)
    assert record["stdout_cut"] == 20_000 - 2 * 8192 and record["stdout_bytes"] == 20_000


def test_a_whole_stream_is_never_split_between_head_and_tail() -> None:
    # A character at the 8 KiB mark, and a short secret straddling it, in a stream kept whole
    record = _captured(("x" * 8191 + "я" * 1000).encode())
    assert "\ufffd" not in record["stdout_head"] and "stdout_cut" not in record
    assert record["stdout_head"].endswith("я" * 1000) and "stdout_tail" not in record
    record = _captured(("x" * 8190 + "ab12" + "y" * 1000).encode(), "ab12")
    assert "ab12" not in "".join(output_lines([record])) and "ab" + "12" not in str(record)


def test_output_over_the_queues_limit_is_still_valid_json_in_the_event_and_in_sql(
        queue: Queue, tmp_path: Path) -> None:
    # Given a result whose output is not JSON and is over the queue's limit (a client bug)
    queue.client.hset("{fs}:host:h", mapping={"address": "h"})
    from tests.queue_support import make_task

    make_task(queue, "t", 1)
    [job] = queue.claim("w", 1).jobs
    raw = '{"not": "closed' + "x" * (OUTPUT_MAX + 10)
    queue.ack("w", [(job.job_id, job.token, JobResult(0, 5, raw))])
    # Then the event carries valid JSON saying what was cut
    [ack] = [f for _id, f in queue.client.xrange(KEYS.events) if f["kind"] == "ack"]
    [record] = json.loads(ack["output"])
    assert len(ack["output"]) <= OUTPUT_MAX and record["stdout_cut"] > OUTPUT_MAX // 2
    assert "over the limit of" in record["note"]
    assert capped_output("short", 100) == "short"
    assert json.loads(stored_output("short", 100)) == [
        {"command": "", "stdout_head": "short", "stdout_bytes": 5}]
    assert stored_output('[{"command": "true"}]', 100) == '[{"command": "true"}]'


@pytest.mark.sshd
def test_a_huge_multibyte_output_is_capped_by_the_setting_and_read_back_in_words(
        redis_client: redis.Redis, redis_url: str, ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a host in the inventory and a command printing 250,000 bytes of multi-byte text
    db_url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(db_url)
    cli = Cli(tmp_path, redis_url, db_url)
    host = ssh_fleet.hosts[0]
    inventory(cli, tmp_path, f"{host.name} ansible_host={host.address} "
                             f"ansible_port={host.port} ansible_user={current_user()}\n")
    script = ("i=0; while [ $i -lt 25000 ]; do printf 'aé€😀'; i=$((i+1)); done; "
              "echo; echo 'the end'; echo 'warned' >&2")
    task = cli.submit("command", "-t", host.name, "-p", f"cmd=sh -c {shlex.quote(script)}",
                      "--executor", "ssh",
                      "--executor-option", f"identity_file={ssh_fleet.identity}",
                      "--executor-option", "allow_agent=false",
                      "--executor-option", "look_for_keys=false")
    # When a node with an output cap of 1024 bytes runs it
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config),
           "FLEETSCHED_DATABASE_URL": db_url, "FLEETSCHED_OUTPUT_CAP_BYTES": "1024"}
    w = WorkerProcess(redis_url, tmp_path, worker_args("node-cap", slots=2, processes=1),
                      env=env).start()
    try:
        code, _, err = cli("tasks", "wait", str(task), "--timeout", "60s")
    finally:
        w.stop()
    drain(redis_client, db_url)
    assert code == 0, err + cli.ok("tasks", "output", str(task))
    # Then SQL holds valid JSON: 1024 bytes of head and of tail at most, whole characters
    [row] = sql_rows(db_url, "SELECT id, output_tail FROM jobs WHERE task_id = :t", t=task)
    [rec] = json.loads(row.output_tail)
    total = 25_000 * len("aé€😀".encode()) + len("\nthe end\n")
    head, tail = rec["stdout_head"].encode(), rec["stdout_tail"].encode()
    assert rec["stdout_bytes"] == total and len(head) <= 1024 and len(tail) <= 1024
    assert len(head) >= 1021 and rec["stdout_tail"].endswith("😀\nthe end\n")
    assert rec["stdout_cut"] == total - len(head) - len(tail)
    assert "\ufffd" not in rec["stdout_head"] + rec["stdout_tail"]
    assert rec["stderr_head"] == "warned\n" and "stderr_cut" not in rec
    # And jobs show and tasks output say the cut in words, between the head and the tail
    note = f"[... {rec['stdout_cut']:,} bytes cut here: the stdout had {total:,} bytes"
    out = cli.ok("jobs", "show", row.id)
    assert note in out and "the end" in out and "warned" in out
    out = cli.ok("tasks", "output", str(task))
    assert f"{host.name}: {note}" in out and f"{host.name}: [stderr] warned" in out


def test_output_that_is_not_a_json_list_is_stored_as_one(queue: Queue, tmp_path: Path) -> None:
    # Given results from a client that does not write the workers' format: the queue carries
    # them as they are (it is a transport) ...
    from scheduler.record.engine import make_engine
    from tests.recorder_events import create_task_rows

    db = f"sqlite:///{tmp_path / 'r.db'}"
    upgrade(db)
    engine = make_engine(db)
    task_id, jobs = create_task_rows(engine, 2)
    from tests.queue_support import make_task

    make_task(queue, str(task_id), 2)
    a, b = queue.claim("w", 2).jobs
    queue.ack("w", [(a.job_id, a.token, JobResult(0, 5, "plain text, not JSON"))])
    queue.fail_job("w", b.job_id, b.token, JobResult(1, 5, "[not json]"), error="x",
                   retryable=False)
    # ... and the record stores a JSON list holding each text
    drain(queue.client, engine)
    rows = dict(sql_rows(db, "SELECT id, output_tail FROM jobs"))
    engine.dispose()
    assert [json.loads(rows[j.job_id])[0]["stdout_head"] for j in (a, b)] == [
        "plain text, not JSON", "[not json]"]
