"""Notifications from a real worker node: its recorder process writes the notice and its sender
thread delivers it to a real HTTP server, once, while the receiver that was down comes back."""

from __future__ import annotations

import time
from pathlib import Path

import redis
import sqlalchemy as sa

from scheduler.record.migrate import upgrade
from tests.notify_support import Webhook
from tests.submit_support import Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args


def test_a_node_tells_the_webhook_once_when_a_task_fails_even_if_it_was_down_at_first(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a task whose every job fails, with a webhook of its own that is down for now
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[fleet]\nn-[01:04]\n")
    webhook.stop()
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "failure_rate=1", "--retries", "0",
                      "--notify", webhook.url("/hook"))
    # When a node with its recorder (and so its sender) works the task through
    args = [a for a in worker_args("nt-1", slots=4, processes=1) if a != "--no-recorder"]
    node = WorkerProcess(redis_url, tmp_path, args, env={"FLEETSCHED_DATABASE_URL": db}).start()
    try:
        # Then the notice is written and its first try fails (the receiver is down)
        wait_until(lambda: sql_rows(db, "SELECT 1 FROM events WHERE kind = 'notify-failed'"),
                   30, "a failed try", node.tail, [node])
        # and once the receiver is back (the sender's first backoff is 30 s: hurry it along)
        webhook.start()
        engine = sa.create_engine(db)
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE notifications SET next_at = created_at"))
        engine.dispose()
        wait_until(lambda: webhook.requests, 30, "the POST", node.tail, [node])
        time.sleep(3)  # a second POST would have come by now
    finally:
        node.stop()
    assert len(webhook.requests) == 1
    body = webhook.requests[0]["json"]
    assert (body["kind"], body["task_id"], body["counts"]["failed"]) == ("failed", str(task), 4)
    assert body["failed_hosts"] == ["n-01", "n-02", "n-03", "n-04"]
    assert [r[0] for r in sql_rows(db, "SELECT state FROM notifications")] == ["sent"]
