"""The recorder lag is what is really unread (``scheduler.record.recorder.backlog``): entries
after the group's last-delivered id, counted, plus the pending ones; never the ``lag`` XINFO
GROUPS reports, which Redis derives from the group's entries-read counter and which stays wrong
for good once that counter is (issue 26 section 6: 148 for good after a failover, the stream
empty and nothing pending). ``status``, ``top`` and the exporter print this one count. Real
redis-server 7 (``XGROUP CREATE ... ENTRIESREAD`` makes the wrong counter) and the test
cluster (the wrong counter survives a failover)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from scheduler.config import load_settings
from scheduler.queue.keys import Keys
from scheduler.record import recorder as rec
from tests.cli_support import isolated_env, run_cli

STREAM = Keys().events


def redis7(client: redis.Redis) -> None:
    if int(str(client.info("server")["redis_version"]).split(".")[0]) < 7:
        pytest.skip("ENTRIESREAD (the wrong counter) needs Redis 7")


def xadd(client: redis.Redis, n: int) -> list[str]:
    return [client.xadd(STREAM, {"kind": "noop", "ts": "1700000000000"}) for _ in range(n)]


def reported_lag(client: redis.Redis) -> int | None:
    return next(g for g in client.xinfo_groups(STREAM) if g["name"] == rec.GROUP)["lag"]


def stale_group(client: redis.Redis, entries: int = 148) -> None:
    """A group that has read every entry, whose entries-read counter says it read none: what
    XINFO calls a lag of ``entries`` for good."""
    xadd(client, entries)
    client.execute_command("XGROUP", "CREATE", STREAM, rec.GROUP, "$", "ENTRIESREAD", "0")


def test_a_group_whose_entries_read_counter_is_wrong_shows_its_true_lag(
        redis_client: redis.Redis) -> None:
    redis7(redis_client)
    # Given a group that read all 148 entries, with an entries-read counter of 0
    stale_group(redis_client)
    assert reported_lag(redis_client) == 148
    # Then nothing is unread or pending
    assert rec.backlog(redis_client, STREAM) == (0, 0)
    # and once the stream is trimmed empty, Redis still says 148; the backlog says 0
    redis_client.xtrim(STREAM, maxlen=0, approximate=False)
    assert redis_client.xlen(STREAM) == 0 and reported_lag(redis_client) == 148
    assert rec.backlog(redis_client, STREAM) == (0, 0)
    # When 5 entries come and a recorder reads 3 of them (pending) and acknowledges 1
    xadd(redis_client, 5)
    assert rec.backlog(redis_client, STREAM) == (5, 0)
    read = redis_client.xreadgroup(rec.GROUP, "c1", {STREAM: ">"}, count=3)[0][1]
    assert rec.backlog(redis_client, STREAM) == (5, 3)
    redis_client.xack(STREAM, rec.GROUP, read[0][0])
    # Then the lag is the 2 unread and the 2 pending, while Redis says 150 (153 added, 3 read)
    assert rec.backlog(redis_client, STREAM) == (4, 2)
    assert reported_lag(redis_client) == 150


def test_entries_redis_reports_as_read_are_counted_when_they_are_not(
        redis_client: redis.Redis) -> None:
    redis7(redis_client)
    # Given 40 entries and a group set back to before the last 30, its counter claiming all 40
    ids = xadd(redis_client, 40)
    redis_client.xgroup_create(STREAM, rec.GROUP, id="$")
    redis_client.execute_command("XGROUP", "SETID", STREAM, rec.GROUP, ids[9],
                                 "ENTRIESREAD", "40")
    assert reported_lag(redis_client) == 0
    # Then the 30 the group will still read are its lag
    assert rec.backlog(redis_client, STREAM) == (30, 0)


@pytest.mark.parametrize("read", [0, 1, 6, 7, 13, 20, 27, 34, 39, 40])
def test_the_unread_count_is_exact_wherever_the_group_stands_and_whatever_the_page(
        redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, read: int) -> None:
    # Given 40 entries, the first 5 trimmed, a group standing after ``read`` of them, and a
    # page of 7 entries, so either side of the group's id may span pages or end in one
    monkeypatch.setattr(rec, "LAG_PAGE", 7)
    ids = xadd(redis_client, 40)
    redis_client.xtrim(STREAM, minid=ids[5], approximate=False)
    last = ids[read - 1] if read else "0-0"
    redis_client.xgroup_create(STREAM, rec.GROUP, id=last)
    truth = 40 - max(read, 5)  # the entries still in the stream after the group's id
    # Then the count is exactly those
    assert rec.unread(redis_client, STREAM, last) == truth
    assert rec.backlog(redis_client, STREAM) == (truth, 0)


def test_status_top_and_the_exporter_show_the_true_lag_of_a_stale_group(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from scheduler.monitoring.exporter import registry_for
    from scheduler.record.migrate import upgrade

    redis7(redis_client)
    # Given the stale group of the issue: 148 by XINFO, the stream empty, nothing pending
    stale_group(redis_client)
    redis_client.xtrim(STREAM, maxlen=0, approximate=False)
    assert reported_lag(redis_client) == 148
    url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(url)
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=url)
    # Then status says 0 events wait for SQL
    _code, out, err = run_cli(["status", "--output", "json"], env)
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert checks["recorder"]["data"]["lag"] == 0, err
    assert checks["recorder"]["message"].startswith("0 event(s)")
    # and top shows a lag of 0
    code, out, err = run_cli(["top", "--once", "--output", "json"], env)
    assert code == 0, err
    assert json.loads(out)["recorder_lag"] == 0
    # and the exporter's gauge is 0
    settings = load_settings({"redis_url": redis_url, "database_url": url}, environ={},
                             config_path=None)
    registry, engine = registry_for(settings)
    try:
        text = generate_latest(registry).decode()
    finally:
        engine.dispose()
    gauges = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert gauges["fleetsched_up"] == 1
    assert gauges["fleetsched_recorder_lag_events"] == 0


def test_on_the_cluster_a_wrong_counter_survives_a_failover_and_the_lag_stays_true(
        cluster_url: str, redis_cluster) -> None:
    from tests.conftest import cluster_client

    client = cluster_client(cluster_url)
    try:
        # Given, in the cluster, the stale group and 3 entries unread
        stale_group(client)
        client.xtrim(STREAM, maxlen=0, approximate=False)
        xadd(client, 3)
        # When the master of its slot fails over to its replica
        master = redis_cluster.master_of(STREAM)
        redis_cluster.failover(redis_cluster.replica_of(master))
        assert redis_cluster.master_of(STREAM) is not master
        # Then the new master still reports 151, and the lag read through the cluster is 3
        new = redis_cluster.master_of(STREAM).client()
        try:
            assert next(g for g in new.xinfo_groups(STREAM))["lag"] == 151
        finally:
            new.close()
        assert rec.backlog(client, STREAM) == (3, 0)
    finally:
        client.close()
