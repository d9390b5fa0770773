"""``fleetsched submit --idempotency-key KEY``: a submit run again after an error or a timeout
prints the first task's id (stderr says it was already submitted, exit 0) and queues nothing
again; the same key with another request is one ConflictError line; a repeat of a task
recorded but not queued (Redis was down) returns it, and reconcile queues it once."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from scheduler.queue.client import Queue
from scheduler.record.migrate import upgrade
from tests.submit_support import (
    KEYS,
    Cli,
    cli_with_inventory,
    inventory,
    redis_snapshot,
    sql_rows,
    sql_snapshot,
)

FLEET = "[web]\nweb-[01:04]\n"
ARGS = ("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate",
        "--in", "1h", "--yes")


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, database_url: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, FLEET, database_url)


def test_a_submit_run_again_with_its_key_prints_the_first_task_and_queues_nothing(
        cli: Cli, redis_client: redis.Redis) -> None:
    first = int(cli.ok("submit", *ARGS, "--idempotency-key", "ci-981").strip())
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    # When the same command runs again (its first reply was lost)
    code, out, err = cli("submit", *ARGS, "--idempotency-key", "ci-981")
    # Then it prints the same task id, says so on stderr, and exits 0
    assert code == 0 and out.strip() == str(first)
    assert f"task {first} was already submitted with idempotency key ci-981" in err
    # And nothing changed in SQL or Redis: no second task, no job queued again
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before
    assert Queue(redis_client, KEYS).task_state(str(first))["total"] == "4"


def test_the_same_key_with_another_request_is_one_conflict_line_and_changes_nothing(
        cli: Cli, redis_client: redis.Redis) -> None:
    first = int(cli.ok("submit", *ARGS, "--idempotency-key", "ci-982").strip())
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    code, out, err = cli("submit", *ARGS, "--priority", "urgent", "--idempotency-key", "ci-982")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0] == (f"error: idempotency key 'ci-982' was used by task {first}, whose "
                        "request asked for something else; nothing was submitted")
    assert lines[1].startswith("hint: use a new key") and len(lines) == 2
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before


def test_another_operator_may_use_the_same_key(cli: Cli) -> None:
    one = int(cli.ok("submit", *ARGS, "--idempotency-key", "shared", operator="alice"))
    two = int(cli.ok("submit", *ARGS, "--idempotency-key", "shared", operator="bob"))
    assert one != two
    assert sorted((r.operator, r.request_key) for r in sql_rows(
        cli.database_url, "SELECT operator, request_key FROM tasks")) == [
        ("alice", "shared"), ("bob", "shared")]


def test_a_repeat_of_a_task_recorded_while_redis_was_down_returns_it_and_reconcile_queues_it_once(
        tmp_path: Path, database_url: str, private_redis) -> None:
    upgrade(database_url)
    cli = Cli(tmp_path, private_redis.url, database_url)
    inventory(cli, tmp_path, FLEET)
    # Given a keyed submit that was recorded but not queued: Redis was down
    private_redis.kill()
    code, _out, err = cli("submit", *ARGS, "--idempotency-key", "ci-983")
    assert code == 1 and "is recorded but not queued" in err
    # When it is run again (Redis still down)
    code, out, err = cli("submit", *ARGS, "--idempotency-key", "ci-983")
    # Then it is the same task, said to be not queued yet, and nothing else was recorded
    assert code == 0 and out.strip() == "1"
    assert "task 1 is recorded but not queued yet" in err and "fleetsched reconcile" in err
    assert [(r.id, r.state) for r in sql_rows(database_url, "SELECT id, state FROM tasks")] == [
        (1, "accepted")]
    # And once Redis is back, reconcile queues its jobs, once
    private_redis.start()
    cli.ok("reconcile", "--nodes-stopped")
    code, out, _err = cli("submit", *ARGS, "--idempotency-key", "ci-983")
    assert code == 0 and out.strip() == "1"
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    try:
        assert Queue(client, KEYS).task_state("1")["total"] == "4"
        assert sum(1 for _ in client.scan_iter("*:task:*")) == 1
    finally:
        client.close()


def test_a_field_added_with_its_default_leaves_the_fingerprint_of_a_request_unchanged() -> None:
    # A retry under an idempotency key after an upgrade that added a request field (as the
    # saved templates added `template` and `template_version`) is still recognised as a repeat
    import dataclasses

    from scheduler.submission.repeats import fingerprint
    from scheduler.submission.submit import TaskRequest

    asked = TaskRequest(action="command", target="group:web", params={"cmd": "uptime"})
    later = dataclasses.make_dataclass(
        "LaterTaskRequest", [("added_later", str, dataclasses.field(default="")),
                             ("listed_later", list, dataclasses.field(default_factory=list))],
        bases=(TaskRequest,), frozen=True)
    same = later(action="command", target="group:web", params={"cmd": "uptime"})
    assert fingerprint(same) == fingerprint(asked)
    # while any value asked, the new field's included, still tells requests apart
    assert fingerprint(later(action="command", target="group:web", params={"cmd": "uptime"},
                             added_later="x")) != fingerprint(asked)
    assert fingerprint(dataclasses.replace(asked, target="group:db")) != fingerprint(asked)
