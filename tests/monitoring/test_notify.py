"""Notifications end to end on real components: events folded by a real Recorder (SQLite and
PostgreSQL, a real redis-server) write outbox rows; a Sender delivers them to a real HTTP server
and a real SMTP server (tests/notify_support.py), retries while a receiver is down, gives up
after its attempts, and records every try as an event, with no secret in events or logs."""

from __future__ import annotations

import email.utils
import logging
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from scheduler.notify import Detector, Policy, Sender, Smtp, list_notifications, parse_targets
from scheduler.queue.keys import Keys
from scheduler.record.fold import StreamEvent
from scheduler.record.state import Stream, apply
from scheduler.record.models import Event, Notification, Schedule, Task, Window
from scheduler.record.recorder import Recorder
from scheduler.record.types import to_ms, utcnow
from tests.notify_support import Webhook
from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all

KEYS = Keys()


def record(client: redis.Redis, engine: sa.Engine, policy: Policy) -> Recorder:
    """A recorder with the notice detector, run until the stream is recorded."""
    rec = Recorder(client, engine, KEYS, "r1", on_batch=Detector(policy))
    while rec.run_once(block_ms=None):
        pass
    return rec


def stream(client: redis.Redis) -> list[StreamEvent]:
    """The stream's entries now (take them before a recorder trims them)."""
    return [StreamEvent(i, f) for i, f in client.xrange(KEYS.events)]


def replay(engine: sa.Engine, policy: Policy, events: list[StreamEvent]) -> None:
    """Fold ``events`` again, as a re-delivered batch would be."""
    assert events
    with engine.begin() as conn:
        Detector(policy)(conn, events, apply(conn, Stream(events)))


def set_notify(engine: sa.Engine, task_id: int, targets: list[str]) -> None:
    with engine.begin() as conn:
        conn.execute(sa.update(Task).where(Task.id == task_id).values(notify=targets))


def outbox(engine: sa.Engine) -> list[Any]:
    with engine.connect() as conn:
        return conn.execute(sa.select(Notification.__table__).order_by(Notification.id)).all()


def notify_events(engine: sa.Engine) -> list[tuple[str, dict[str, Any]]]:
    with engine.connect() as conn:
        return [(k, d) for k, d in conn.execute(
            sa.select(Event.kind, Event.data).where(Event.kind.like("notify-%"))
            .order_by(Event.ts, Event.id))]


def failed_task(client: redis.Redis, engine: sa.Engine, hosts: int = 3) -> tuple[int, list]:
    """A task whose second job fails, its events in the stream."""
    task_id, jobs = create_task_rows(engine, hosts)
    xadd_all(client, job_lifecycle(str(task_id), jobs, fail=frozenset({jobs[1][0]})))
    return task_id, jobs


# ------------------------------------------------------------------------------ delivery


def test_a_failed_task_is_told_once_by_webhook_and_once_by_mail(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook, smtp: Any) -> None:
    # Given a global mail target, and a task with a webhook of its own whose second job fails
    policy = Policy(targets=parse_targets(["mailto:ops@example.org"]),
                    smtp=Smtp(host="127.0.0.1", port=smtp.port, sender="fs@example.org"))
    task_id, jobs = create_task_rows(engine, 3)
    set_notify(engine, task_id, [webhook.url()])
    xadd_all(redis_client, job_lifecycle(str(task_id), jobs, fail=frozenset({jobs[1][0]})))
    # When the recorder records the stream, a replay folds it again, and the sender runs twice
    events = stream(redis_client)
    record(redis_client, engine, policy)
    replay(engine, policy, events)
    sender = Sender(engine, policy)
    assert sender.run_once() == 2
    assert sender.run_once() == 0
    # Then the webhook got exactly one POST with the task's facts and a Slack text
    assert len(webhook.requests) == 1
    post = webhook.requests[0]
    assert post["headers"]["Content-Type"] == "application/json"
    body = post["json"]
    assert (body["kind"], body["task_id"], body["action"], body["operator"], body["state"]) == (
        "failed", str(task_id), "command", "alice", "failed")
    assert body["counts"] == {"total": 3, "succeeded": 2, "failed": 1, "lost": 0,
                              "cancelled": 0, "running": 0}
    assert body["failed_hosts"] == [jobs[1][1]]
    assert body["text"] == (f"[fleetsched] task {task_id} failed: command by alice, 2 of 3 "
                            f"succeeded, 1 failed, 0 cancelled; failed hosts: {jobs[1][1]}")
    # and the mailbox exactly one mail, the same line as its subject
    assert len(smtp.mails) == 1
    sender_addr, to, mail = smtp.mails[0]
    assert (sender_addr, to, mail["Subject"]) == ("fs@example.org", ["ops@example.org"],
                                                  body["text"])
    assert f'"task_id": "{task_id}"' in mail.get_content()
    # with the headers a mailbox sorts and threads by: when it was sent, and an id of its own
    sent_at = email.utils.parsedate_to_datetime(mail["Date"])
    assert abs((datetime.now(UTC) - sent_at).total_seconds()) < 600, mail["Date"]
    assert re.fullmatch(r"<[^<>@\s]+@example\.org>", mail["Message-ID"] or ""), mail["Message-ID"]
    # and both outbox rows are sent, each with its notify-sent event
    assert [(r.kind, r.state, r.attempts) for r in outbox(engine)] == [("failed", "sent", 1)] * 2
    assert sorted(d["target"] for k, d in notify_events(engine) if k == "notify-sent") == [
        f"http://127.0.0.1:{webhook.port}/...", "mailto:ops@example.org"]


def test_a_task_that_succeeds_or_has_no_target_is_told_to_nobody(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a task that succeeds with a target, and a failed one without any
    ok_id, ok_jobs = create_task_rows(engine, 2)
    set_notify(engine, ok_id, [webhook.url()])
    xadd_all(redis_client, job_lifecycle(str(ok_id), ok_jobs))
    failed_task(redis_client, engine)
    # When both are recorded and the sender runs
    record(redis_client, engine, Policy())
    Sender(engine, Policy()).run_once()
    # Then nothing is written or sent
    assert outbox(engine) == [] and webhook.requests == []


def test_a_receiver_that_is_down_is_retried_with_backoff_and_told_once_it_is_back(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a webhook that is down, and a failed task
    webhook.stop()
    policy = Policy(targets=parse_targets([webhook.url()]))
    failed_task(redis_client, engine)
    record(redis_client, engine, policy)
    sender = Sender(engine, policy, backoff_s=10, timeout_s=2)
    t0 = utcnow()
    # When the sender tries: the notice stays pending, due again after the backoff
    assert sender.run_once(now=t0) == 1
    (row,) = outbox(engine)
    assert (row.state, row.attempts, row.next_at) == ("pending", 1, t0 + timedelta(seconds=10))
    assert "Connection refused" in row.last_error
    assert sender.run_once(now=t0 + timedelta(seconds=5)) == 0  # not due yet
    # and meanwhile the recorder keeps recording other tasks
    other, jobs = create_task_rows(engine, 2)
    xadd_all(redis_client, job_lifecycle(str(other), jobs))
    rec = record(redis_client, engine, policy)
    assert rec.lag() == 0
    with engine.connect() as conn:
        assert conn.execute(sa.select(Task.state).where(Task.id == other)).scalar_one() == \
            "succeeded"
    # and the second try backs off twice as long
    t1 = t0 + timedelta(seconds=11)
    assert sender.run_once(now=t1) == 1
    (row,) = outbox(engine)
    assert (row.state, row.attempts, row.next_at) == ("pending", 2, t1 + timedelta(seconds=20))
    # Then once the receiver is back, the next due try delivers it, once
    webhook.start()
    assert sender.run_once(now=t1 + timedelta(seconds=21)) == 1
    assert [r.state for r in outbox(engine)] == ["sent"]
    assert len(webhook.requests) == 1 and webhook.requests[0]["json"]["kind"] == "failed"
    kinds = [(k, d["attempt"], "retry_at" in d) for k, d in notify_events(engine)]
    assert kinds == [("notify-failed", 1, True), ("notify-failed", 2, True),
                     ("notify-sent", 3, False)]


def test_a_mail_server_that_is_down_gets_the_mail_once_it_is_back(
        engine: sa.Engine, redis_client: redis.Redis, smtp: Any) -> None:
    # Given a mail target whose SMTP server is down
    smtp.stop()
    policy = Policy(targets=parse_targets(["mailto:ops@example.org"]),
                    smtp=Smtp(host="127.0.0.1", port=smtp.port))
    failed_task(redis_client, engine)
    record(redis_client, engine, policy)
    sender = Sender(engine, policy, backoff_s=1)
    t0 = utcnow()
    # When the sender tries, then tries again once the server is back
    assert sender.run_once(now=t0) == 1
    assert "Connection refused" in outbox(engine)[0].last_error
    smtp.start()
    assert sender.run_once(now=t0 + timedelta(seconds=2)) == 1
    # Then one mail arrived and the notice is sent
    assert len(smtp.mails) == 1 and [r.state for r in outbox(engine)] == ["sent"]


def test_a_receiver_that_hangs_holds_up_neither_the_recorder_nor_the_database(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a receiver that takes 4 s to answer, and a sender (2 s timeout) in its thread
    webhook.delay_s = 4
    policy = Policy(targets=parse_targets([webhook.url()]))
    failed_task(redis_client, engine)
    record(redis_client, engine, policy)
    sender = Sender(engine, policy, timeout_s=2)
    stop = threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not webhook.arrived and time.monotonic() < deadline:
            time.sleep(0.02)
        assert webhook.arrived == 1
        # When the recorder records a task of 200 jobs while the sender waits on the receiver
        start = time.monotonic()
        other, jobs = create_task_rows(engine, 200)
        xadd_all(redis_client, job_lifecycle(str(other), jobs))
        record(redis_client, engine, policy)
        took = time.monotonic() - start
        in_flight = webhook.arrived == 1 and not webhook.requests
    finally:
        stop.set()
        thread.join(10)
    # Then it recorded them before the receiver even answered
    assert in_flight and took < 1.5, took
    with engine.connect() as conn:
        assert conn.execute(sa.select(Task.succeeded).where(Task.id == other)).scalar_one() == 200
    # and the try that timed out is recorded, the notice pending for another try
    (row,) = outbox(engine)
    assert (row.state, row.attempts) == ("pending", 1)
    assert "timeout" in row.last_error.lower() or "timed out" in row.last_error.lower()


def test_two_senders_and_a_slow_receiver_deliver_each_notice_once(
        engine: sa.Engine, webhook: Webhook) -> None:
    from scheduler.notify.detect import enqueue

    # Given five notices, a receiver taking 0.6 s per POST and senders with a 2 s lease, so
    # that sender A's pass outlasts the lease (its last claim comes about 2.4 s in)
    webhook.delay_s = 0.6
    with engine.begin() as conn:
        for i in range(5):
            enqueue(conn, f"failed:{i}", "failed", [webhook.url(f"/n{i}")], {"kind": "failed"})
    a, b = Sender(engine, Policy(), lease_s=2.0), Sender(engine, Policy(), lease_s=2.0)
    # When A sends them and sender B runs while A's last POST is in flight
    thread = threading.Thread(target=a.run_once)
    start = time.monotonic()
    thread.start()
    while webhook.arrived < 5 and time.monotonic() < start + 20:
        time.sleep(0.01)
    assert webhook.arrived == 5 and time.monotonic() - start > 2.0
    b_tried = b.run_once()
    thread.join(20)
    # Then B found nothing due: each notice was POSTed exactly once and tried once
    assert b_tried == 0
    assert sorted(r["path"] for r in webhook.requests) == [f"/n{i}" for i in range(5)]
    assert [(r.state, r.attempts) for r in outbox(engine)] == [("sent", 1)] * 5


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_webhook_answering_a_redirect_is_not_delivered_and_is_retried(
        engine: sa.Engine, webhook: Webhook, status: int) -> None:
    from scheduler.notify.detect import enqueue

    # Given a receiver that answers the POST with a redirect to a page that answers a GET 200
    webhook.status, webhook.location = status, "/landing"
    with engine.begin() as conn:
        enqueue(conn, "failed:1", "failed", [webhook.url("/hook/s3cr3t")], {"kind": "failed"})
    sender = Sender(engine, Policy(), backoff_s=10)
    t0 = utcnow()
    # When the sender tries it
    assert sender.run_once(now=t0) == 1
    # Then the redirect was not followed, and the notice is pending for another try, its
    # reason the redirect (without the URL's secret)
    assert webhook.gets == [] and len(webhook.requests) == 1
    (row,) = outbox(engine)
    assert (row.state, row.attempts, row.next_at) == ("pending", 1, t0 + timedelta(seconds=10))
    assert row.last_error.startswith(f"HTTP {status} ") and "redirect" in row.last_error
    assert "s3cr3t" not in row.last_error and "landing" not in row.last_error
    assert sender.stats.sent == 0 and sender.stats.failed == 1


def test_a_notice_is_given_up_after_its_attempts_and_that_is_recorded(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a receiver that answers 500, and a sender allowed two tries
    webhook.status = 500
    policy = Policy(targets=parse_targets([webhook.url()]))
    failed_task(redis_client, engine)
    record(redis_client, engine, policy)
    sender = Sender(engine, policy, max_attempts=2, backoff_s=1)
    t0 = utcnow()
    # When it tries, and tries again after the backoff, and once more later
    assert sender.run_once(now=t0) == 1
    assert sender.run_once(now=t0 + timedelta(seconds=2)) == 1
    assert sender.run_once(now=t0 + timedelta(hours=1)) == 0
    # Then the notice is failed for good with its reason, and the last event says it gave up
    (row,) = outbox(engine)
    assert (row.state, row.attempts, row.last_error) == ("failed", 2,
                                                         "HTTP 500 Internal Server Error")
    events = notify_events(engine)
    assert [(k, d["attempt"], d.get("gave_up")) for k, d in events] == [
        ("notify-failed", 1, None), ("notify-failed", 2, True)]
    assert len(webhook.requests) == 2
    assert [r["state"] for r in list_notifications(engine, state="failed")] == ["failed"]


def test_secrets_of_a_webhook_url_are_in_no_event_no_log_and_no_listing(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook,
        caplog: pytest.LogCaptureFixture) -> None:
    # Given a webhook URL with a secret path and a secret token, that answers 500 then 200
    url = webhook.url("/services/T0/B0/s3cr3tpath?token=t0ps3cret")
    webhook.status = 500
    policy = Policy(targets=parse_targets([url]))
    failed_task(redis_client, engine)
    caplog.set_level(logging.DEBUG)
    record(redis_client, engine, policy)
    sender = Sender(engine, policy, backoff_s=0)
    # When a try fails and the next one succeeds
    sender.run_once()
    webhook.status = 200
    sender.run_once(now=utcnow() + timedelta(seconds=1))
    # Then the POST went to the full URL
    assert webhook.requests[-1]["path"] == "/services/T0/B0/s3cr3tpath?token=t0ps3cret"
    # but neither secret is in the events, the log or the outbox listing
    shown = [str(notify_events(engine)), caplog.text, str(list_notifications(engine))]
    for text in shown:
        assert "s3cr3tpath" not in text and "t0ps3cret" not in text
    assert f"http://127.0.0.1:{webhook.port}/..." in shown[0]


# ---------------------------------------------------------------------------- the causes


def test_a_stored_target_with_a_control_character_is_given_up_without_showing_its_secret(
        engine: sa.Engine, webhook: Webhook, caplog: pytest.LogCaptureFixture) -> None:
    from scheduler.notify import DeliveryError, send
    from scheduler.notify.detect import enqueue
    from scheduler.notify.targets import Smtp as SmtpSettings
    from scheduler.notify.targets import Target

    # Given an outbox row whose target has a control character in its secret path (stored
    # before the check that refuses it)
    url = webhook.url("/services/T0/\x7fs3cr3tpath?token=t0ps3cret")
    with engine.begin() as conn:
        enqueue(conn, "failed:1", "failed", [url], {"kind": "failed"})
    caplog.set_level(logging.DEBUG)
    # When the sender meets it
    Sender(engine, Policy()).run_once()
    # Then it is given up, and neither the row, the event nor the log shows the secret
    (row,) = outbox(engine)
    assert row.state == "failed" and "control character" in row.last_error
    shown = repr(notify_events(engine)) + row.last_error + caplog.text
    assert "s3cr3t" not in shown and "t0ps3cret" not in shown and webhook.arrived == 0
    # and sent as it is, the error urllib gives (which quotes the path) is masked too
    with pytest.raises(DeliveryError) as caught:
        send(Target("webhook", url), {"kind": "failed"}, SmtpSettings())
    assert "s3cr3t" not in str(caught.value) and "control characters" in str(caught.value)


def test_an_abort_and_a_job_lost_for_good_are_told_once_each(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a task with a target whose first job is lost for good, then the task aborts
    policy = Policy(targets=parse_targets([webhook.url()]))
    task_id, jobs = create_task_rows(engine, 2)
    t, ts = str(task_id), 1_700_000_000_000
    xadd_all(redis_client, [
        {"kind": "create", "ts": ts, "task": t, "operator": "bob"},
        {"kind": "enqueue", "ts": ts, "task": t, "jobs": f"{jobs[0][0]} {jobs[1][0]}", "count": 2},
        {"kind": "claim", "ts": ts + 1, "task": t, "job": jobs[0][0], "host": jobs[0][1],
         "attempt": 1, "token": 1, "worker": "w1"},
        {"kind": "lost", "ts": ts + 2, "task": t, "job": jobs[0][0], "host": jobs[0][1],
         "attempt": 1, "token": 2, "outcome": "failed", "error": "lost: worker w1 died"},
        {"kind": "abort", "ts": ts + 3, "task": t, "error": "1 failure reached max_failures 1"},
        {"kind": "cancel", "ts": ts + 3, "task": t, "jobs": jobs[1][0], "count": 1},
    ])
    # When it is recorded (and replayed) and the sender runs
    events = stream(redis_client)
    record(redis_client, engine, policy)
    replay(engine, policy, events)
    Sender(engine, policy).run_once()
    # Then one "lost" and one "aborted" notice went out, and no "failed" one
    got = sorted((r["json"]["kind"], r["json"]["counts"]["lost"]) for r in webhook.requests)
    assert got == [("aborted", 1), ("lost", 1)]
    aborted = next(r["json"] for r in webhook.requests if r["json"]["kind"] == "aborted")
    assert aborted["text"].startswith(f"[fleetsched] task {task_id} was aborted: command by alice")
    assert aborted["failed_hosts"] == [jobs[0][1]]


def test_a_missed_occurrence_is_told_to_the_schedule_targets_and_the_global_ones(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a schedule with a target of its own, and a global target
    with engine.begin() as conn:
        conn.execute(sa.insert(Schedule).values(
            name="nightly", cron="0 3 * * *", tz="UTC", action="command", params={},
            target="all", options={"notify": [webhook.url("/schedule")]}, catchup="latest",
            catchup_window_s=3600, overlap="skip", paused=False,
            created_at=utcnow(), updated_at=utcnow()))
    policy = Policy(targets=parse_targets([webhook.url("/global")]))
    occurrence = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
    # When its occurrence is missed (the firer's event) and recorded
    xadd_all(redis_client, [{"kind": "missed", "ts": to_ms(occurrence) + 7_200_000,
                             "schedule": "nightly", "occurrence": to_ms(occurrence),
                             "error": "late: 2h after the occurrence (catch-up window 1h)"}])
    record(redis_client, engine, policy)
    Sender(engine, policy).run_once()
    # Then both targets are told, once each
    assert sorted(r["path"] for r in webhook.requests) == ["/global", "/schedule"]
    body = webhook.requests[0]["json"]
    assert (body["kind"], body["schedule"], body["occurrence"]) == (
        "missed", "nightly", occurrence.isoformat())
    assert body["text"] == ("[fleetsched] schedule nightly occurrence 2026-11-24T03:00:00+00:00 "
                            "missed: late: 2h after the occurrence (catch-up window 1h)")


def test_notify_on_leaves_out_the_kinds_not_listed(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given targets told only of missed occurrences
    policy = Policy(targets=parse_targets([webhook.url()]), kinds=frozenset({"missed"}))
    task_id, _ = failed_task(redis_client, engine)
    set_notify(engine, task_id, [webhook.url("/own")])
    # When a task fails
    record(redis_client, engine, policy)
    # Then nobody is told, not even the task's own target
    assert outbox(engine) == []


def test_a_window_awaiting_approval_is_told_once_before_it_opens(
        engine: sa.Engine, webhook: Webhook) -> None:
    # Given a daily window that requires approval and has none, opening within the day
    with engine.begin() as conn:
        for name, approved in (("patch-night", None), ("approved-night", utcnow())):
            conn.execute(sa.insert(Window).values(
                name=name, kind="recurring", cron="0 * * * *", duration_s=1800, tz="UTC",
                requires_approval=True, approved_at=approved, approved_by=None,
                created_at=utcnow(), updated_at=utcnow()))
    policy = Policy(targets=parse_targets([webhook.url()]))
    # When the sender runs its scan twice
    Sender(engine, policy, scan_every_s=0).run_once()
    Sender(engine, policy, scan_every_s=0).run_once()
    # Then the unapproved window is told once, the approved one never
    assert [r["json"]["window"] for r in webhook.requests] == ["patch-night"]
    assert "awaits the team" in webhook.requests[0]["json"]["text"]


def test_a_customer_is_asked_at_its_contacts_once_per_version_of_a_window_over_its_hosts(
        engine: sa.Engine, webhook: Webhook) -> None:
    from scheduler.record.models import Host, Tenant, WindowAssignment

    # Given acme's host under a monthly window that needs approval, opening weeks from now
    with engine.begin() as conn:
        host = conn.execute(sa.insert(Host).values(
            name="acme-01", tenant="acme", port=22, vars={}, created_at=utcnow(),
            updated_at=utcnow()).returning(Host.id)).scalar_one()
        window = conn.execute(sa.insert(Window).values(
            name="acme-monthly", kind="recurring", cron="0 22 1 * *", duration_s=3600,
            tz="UTC", requires_approval=True, created_at=utcnow(), updated_at=utcnow(),
            created_by="alice").returning(Window.id)).scalar_one()
        conn.execute(sa.insert(WindowAssignment).values(window_id=window, host_id=host))
        conn.execute(sa.insert(Tenant).values(name="acme", approval_required=False,
                                              contacts=[webhook.url("/acme")],
                                              created_at=utcnow()))
    team = Policy(targets=parse_targets([webhook.url("/team")]))
    now = datetime(2026, 11, 27, 12, tzinfo=UTC)
    # When the sender scans twice
    Sender(engine, team, scan_every_s=0).run_once(now)
    Sender(engine, team, scan_every_s=0).run_once(now)
    # Then acme's contact is asked once, naming the window and its version; the team, whose
    # reminder waits for the opening's lead, is not told yet
    assert [(r["path"], r["json"]["window"], r["json"]["version"], r["json"]["awaited"])
            for r in webhook.requests] == [("/acme", "acme-monthly", 1, ["customer acme"])]
    # When the window is edited (version 2), acme is asked again
    with engine.begin() as conn:
        conn.execute(sa.update(Window).values(version=2))
    Sender(engine, team, scan_every_s=0).run_once(now)
    assert [r["json"]["version"] for r in webhook.requests] == [1, 2]


def test_prune_removes_old_sent_and_given_up_notices_and_keeps_pending_ones(
        engine: sa.Engine) -> None:
    from scheduler.notify.detect import enqueue
    from scheduler.record.prune import prune

    # Given notices 100 days old (sent, given up, still pending) and a recent sent one
    now = utcnow()
    old = now - timedelta(days=100)
    with engine.begin() as conn:
        for key, when in (("a", old), ("b", old), ("c", old), ("d", now)):
            enqueue(conn, key, "failed", ["mailto:ops@example.org"], {}, now=when)
        for key, state in (("a", "sent"), ("b", "failed"), ("d", "sent")):
            conn.execute(sa.update(Notification).where(Notification.key.startswith(key + " "))
                         .values(state=state))
    # When the record is pruned of what is older than 90 days
    result = prune(engine, timedelta(days=90), now=now)
    # Then the old sent and given-up notices are gone, the pending and the recent one stay
    assert result.notifications == 2
    assert sorted((r.key[0], r.state) for r in outbox(engine)) == [("c", "pending"),
                                                                   ("d", "sent")]


def test_a_notice_names_ten_failed_hosts_and_counts_the_rest(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a task of 12 hosts that all fail
    policy = Policy(targets=parse_targets([webhook.url()]))
    task_id, jobs = create_task_rows(engine, 12)
    xadd_all(redis_client, job_lifecycle(str(task_id), jobs,
                                         fail=frozenset(j for j, _ in jobs)))
    # When it is recorded and told
    record(redis_client, engine, policy)
    Sender(engine, policy).run_once()
    # Then the first ten hosts are named and the other two counted
    body = webhook.requests[0]["json"]
    assert body["failed_hosts"] == [h for _, h in jobs[:10]]
    assert body["failed_hosts_more"] == 2
    assert body["text"].endswith(f"failed hosts: {', '.join(h for _, h in jobs[:10])} and 2 more")


def test_a_stopped_rollout_is_told_once_with_its_wave_and_why(
        engine: sa.Engine, redis_client: redis.Redis, webhook: Webhook) -> None:
    # Given a task in waves whose health check stopped the rollout after wave 1
    policy = Policy(targets=parse_targets([webhook.url()]))
    task_id, jobs = create_task_rows(engine, 2)
    t, ts = str(task_id), 1_700_000_000_000
    why = "wave 1 check `false` failed on 1 of 1 hosts: web-1: exit 1"
    xadd_all(redis_client, [
        {"kind": "create", "ts": ts, "task": t, "operator": "bob"},
        {"kind": "wave-stop", "ts": ts + 1, "task": t, "wave": 1, "state": "stopped",
         "error": why},
    ])
    # When it is recorded (and replayed) and the sender runs
    events = stream(redis_client)
    record(redis_client, engine, policy)
    replay(engine, policy, events)
    Sender(engine, policy).run_once()
    # Then one "stopped" notice went out, saying which wave, why and what to do
    [doc] = [r["json"] for r in webhook.requests]
    assert (doc["kind"], doc["wave"], doc["error"]) == ("stopped", "1", why)
    assert doc["text"] == (f"[fleetsched] task {task_id} rollout stopped after wave 1: {why}; "
                           f"it waits for `fleetsched tasks continue {task_id}` or `tasks cancel`")
