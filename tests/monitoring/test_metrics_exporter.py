"""``fleetsched exporter`` serves the numbers ``top`` and ``status`` print, read per scrape, and
still answers when Redis is gone: a real exporter process on the test redis-server and a SQLite
record, scraped over HTTP and parsed with prometheus_client's parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from scheduler.monitoring import exported_names
from scheduler.queue.client import Queue
from scheduler.queue.presence import redis_now_ms
from tests.servers import RedisServer, free_port
from tests.submit_support import KEYS, cli_with_inventory, drain
from tests.worker_support import ROOT, wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@contextmanager
def exporter(tmp: Path, redis_url: str, database_url: str, *extra: str) -> Iterator[int]:
    """A ``fleetsched exporter`` process on a free port; yields the port once it answers."""
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")},
           "FLEETSCHED_REDIS_URL": redis_url, "FLEETSCHED_DATABASE_URL": database_url,
           "XDG_CONFIG_HOME": str(tmp / "config"), "PYTHONPATH": str(ROOT)}
    log = tmp / "exporter.log"
    with open(log, "ab") as err:
        proc = subprocess.Popen([sys.executable, "-P", "-m", "scheduler", "exporter", "--port",
                                 str(port), *extra], env=env, stdout=subprocess.DEVNULL,
                                stderr=err, cwd=tmp)

    def answers() -> bool:
        try:
            scrape(port)
            return True
        except OSError:
            assert proc.poll() is None, log.read_text()
            return False
    try:
        wait_until(answers, 20, "the exporter to answer", log.read_text)
        yield port
    finally:
        proc.terminate()
        assert proc.wait(15) == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_the_exporter_shows_the_numbers_top_and_status_show(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-[01:06]\n")
    run = ("-p", "cmd=true", "--executor", "simulate")
    # Given an urgent task paused, two jobs due now, one urgent, two an hour from now
    paused = cli.submit("command", "-t", "web-06", "--priority", "urgent", *run)
    cli.ok("tasks", "pause", str(paused))
    cli.submit("command", "-t", "web-01,web-02", *run)
    cli.submit("command", "-t", "web-03", "--priority", "urgent", *run)
    cli.submit("command", "-t", "web-04,web-05", "--in", "1h", *run)
    # and a worker whose claim held the paused job and took the urgent one, alive
    [job] = Queue(redis_client, KEYS, lease_ms=60_000).claim("w-1", 1).jobs
    now = redis_now_ms(redis_client)
    redis_client.hset(KEYS.workers, "w-1", json.dumps({"node": "n", "pid": 1, "slots": 8,
                                                       "busy": 1, "ms": now,
                                                       "lease_ms": 60_000}))
    # and a missed schedule occurrence in the record, and one event not yet recorded
    redis_client.xadd(KEYS.events, {"kind": "missed", "ts": str(now), "schedule": "nightly",
                                    "occurrence": str(now - 60_000), "error": "late"})
    drain(redis_client, cli.database_url)
    redis_client.xadd(KEYS.events, {"kind": "note", "ts": str(now)})

    with exporter(tmp_path, redis_url, cli.database_url) as port:
        got = scrape(port)
    top = json.loads(cli.ok("top", "--once", "--output", "json"))
    status = {c["check"]: c["data"] for c in
              json.loads(cli("status", "--output", "json")[1])["checks"]}

    # Then each figure is the one top or status prints
    assert value(got, "fleetsched_up") == 1 and value(got, "fleetsched_database_up") == 1
    assert {p: value(got, "fleetsched_queue_due_now", priority=p)
            for p in ("urgent", "normal", "bulk")} == top["by_class"] == {
        "urgent": 0, "normal": 2, "bulk": 0}
    assert value(got, "fleetsched_queue_later") == top["later"] == 2
    assert value(got, "fleetsched_jobs_running") == top["running"] == 1
    assert value(got, "fleetsched_jobs_held") == top["held"] == 1
    assert value(got, "fleetsched_jobs_parked") == top["parked"] == 0
    assert value(got, "fleetsched_jobs_dead") == top["dead"] == 0
    assert value(got, "fleetsched_recorder_lag_events") == top["recorder_lag"] == \
        status["recorder"]["lag"] == 1
    # (status reads after the scrape: the same head, older by then)
    assert status["queue"]["oldest_overdue_ms"] >= \
        value(got, "fleetsched_queue_oldest_overdue_seconds") * 1000 > 0
    assert value(got, "fleetsched_workers_live") == status["workers"]["alive"] == 1
    assert value(got, "fleetsched_workers_slots") == status["workers"]["slots"] == 8
    assert value(got, "fleetsched_workers_slots_busy") == status["workers"]["busy"] == 1
    assert value(got, "fleetsched_schedule_missed_recent") == 1
    assert value(got, "fleetsched_tasks_live") == 4
    assert job.task_id and ("fleetsched_reorder_age_seconds", ()) not in got  # no reorder yet
    # and nothing is served that the documented list (and the alert rules' check) lacks
    assert {name for name, _ in got} - {"fleetsched_queue_due_now"} <= exported_names()


def test_the_exporter_answers_up_0_while_redis_is_down(
        tmp_path: Path, private_redis: RedisServer) -> None:
    missing_db = f"sqlite:///{tmp_path / 'none' / 'fleetsched.db'}"
    with exporter(tmp_path, private_redis.url, missing_db, "--timeout", "1") as port:
        assert value(scrape(port), "fleetsched_up") == 1
        # When Redis dies under it
        private_redis.kill()
        started = time.monotonic()
        got = scrape(port)
        # Then the scrape still answers, at once, saying so
        assert time.monotonic() - started < 5
        assert value(got, "fleetsched_up") == 0
        assert value(got, "fleetsched_database_up") == 0
        assert not any(name.startswith("fleetsched_queue") for name, _ in got)


@pytest.mark.postgres
def test_a_database_that_stops_answering_costs_a_scrape_its_timeout_never_a_hang(
        tmp_path: Path, redis_url: str, fresh_postgres_url: str) -> None:
    from sqlalchemy.engine import make_url

    from scheduler.record.migrate import upgrade
    from tests.tcp_proxy import TcpProxy

    upgrade(fresh_postgres_url)
    url = make_url(fresh_postgres_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        proxied = url.set(host=proxy.host, port=proxy.port).render_as_string(hide_password=False)
        with exporter(tmp_path, redis_url, proxied, "--timeout", "1") as port:
            assert value(scrape(port), "fleetsched_database_up") == 1
            # When the path to PostgreSQL stalls: connections open, nothing comes back
            proxy.freeze()
            for _ in range(3):  # the stuck read is not waited for again, nor repeated
                started = time.monotonic()
                got = scrape(port)
                # Then each scrape answers within its timeout: the database down, Redis up
                assert time.monotonic() - started < 4
                assert value(got, "fleetsched_database_up") == 0
                assert value(got, "fleetsched_up") == 1
            # And once the path flows again, so does the record
            proxy.thaw()
            wait_until(lambda: value(scrape(port), "fleetsched_database_up") == 1, 15,
                       "the record read again")
