"""The database goes away under load: events wait in Redis, the recorder retries with backoff
and catches up when the database returns. Nothing is lost, nothing is recorded twice.

The outage is real: the recorder reaches a real PostgreSQL through a loopback TCP proxy that
the test cuts (every connection reset, new ones refused) and restores."""

from __future__ import annotations

import threading
import time

import pytest
import redis
import sqlalchemy as sa

from scheduler.queue.keys import Keys
from scheduler.record import migrate
from scheduler.record.engine import make_engine
from scheduler.record.models import Event, Job, Task
from scheduler.record.recorder import Recorder
from tests.faults.history import check
from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all
from tests.tcp_proxy import TcpProxy

KEYS = Keys()


class Producer(threading.Thread):
    """XADDs events in the documented format at a steady pace until stopped."""

    def __init__(self, client: redis.Redis, rows: list[tuple[str, str]], task_id: int) -> None:
        super().__init__(name="producer", daemon=True)
        self.client, self.rows, self.task_id = client, rows, task_id
        self.ids: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        # First the lifecycle of a task that has SQL rows, then queue-only events forever.
        events = list(job_lifecycle(str(self.task_id), self.rows))
        n = 0
        while not self.stop.is_set():
            chunk = events[:40] if events else list(job_lifecycle(
                f"q{n}", [(f"q{n}.{i}", f"h{i}") for i in range(19)]))
            events = events[40:]
            self.ids += xadd_all(self.client, chunk)
            n += 1
            time.sleep(0.02)


def _proxied(url: str, proxy: TcpProxy) -> str:
    return sa.engine.make_url(url).set(host=proxy.host, port=proxy.port).render_as_string(
        hide_password=False)


def _wait(predicate, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.postgres
def test_a_database_outage_under_load_loses_and_duplicates_no_event(
        fresh_postgres_url: str, redis_client: redis.Redis) -> None:
    # Given a recorder writing to PostgreSQL through a proxy, and events arriving steadily
    migrate.upgrade(fresh_postgres_url)
    direct = make_engine(fresh_postgres_url)
    url = sa.engine.make_url(fresh_postgres_url)
    task_id, rows = create_task_rows(direct, 100)
    with TcpProxy(url.host, url.port) as proxy:
        engine = make_engine(_proxied(fresh_postgres_url, proxy))
        recorder = Recorder(redis_client, engine, KEYS, "r1", batch=200, block_ms=100)
        stop = threading.Event()
        rec_thread = threading.Thread(target=recorder.run, args=(stop,), daemon=True)
        producer = Producer(redis_client, rows, task_id)
        rec_thread.start()
        producer.start()
        try:
            _wait(lambda: recorder.stats.events > 300, 30, "the recorder to get going")
            # When the database becomes unreachable for a while
            proxy.cut()
            recorded_at_cut = _count(direct)
            time.sleep(3.0)
            # Then events wait in Redis while the recorder fails and backs off
            assert recorder.stats.failures >= 2
            assert recorder.lag() > 0
            assert _count(direct) - recorded_at_cut < 400  # at most batches in flight at the cut
            # When the database comes back
            proxy.restore()
            time.sleep(1.0)
            producer.stop.set()
            producer.join(10)
            # Then the recorder catches up with everything produced
            _wait(lambda: _count(direct) >= len(producer.ids) and recorder.lag() == 0, 60,
                  "the recorder to catch up")
        finally:
            producer.stop.set()
            stop.set()
            rec_thread.join(15)
            engine.dispose()
    with direct.connect() as conn:
        recorded = list(conn.scalars(sa.select(Event.id)))
        states = set(conn.scalars(sa.select(Job.state).where(Job.task_id == task_id)))
        task = conn.execute(sa.select(Task.succeeded, Task.state)
                            .where(Task.id == task_id)).one()
    direct.dispose()
    # 0 lost, 0 duplicated: exactly the produced ids, each once
    assert len(recorded) == len(set(recorded)) == len(producer.ids)
    assert set(recorded) == set(producer.ids)
    assert not rec_thread.is_alive()
    # and the rows the events describe are complete
    assert states == {"succeeded"} and tuple(task) == (100, "succeeded")
    assert recorder.pending() == 0
    # The producer stops mid-lifecycle: the last jobs may have no end yet
    check(fresh_postgres_url, require_end=False)


def _count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one()
