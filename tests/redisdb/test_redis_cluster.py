"""fleetsched on a real Redis Cluster (3 masters, 3 replicas; ``tests.cluster.RedisCluster``):
the ``redis+cluster://`` URL, the refusal of an evicting master, ``redis status`` and ``doctor``
per node, a worker node draining a task into SQL, and proof that the queue tests ran every Lua
script on the cluster (``qclient``'s ``cluster`` variant records them)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from scheduler.config import Settings, load_settings
from scheduler.errors import ConfigError, RedisUnavailableError
from scheduler.queue.scripts import VERBS
from scheduler.redisdb.cluster import parse_cluster_url
from scheduler.redisdb.connect import connect
from tests.cluster import RedisCluster
from tests.faults.history import check
from tests.schedule_support import entry_score, fired, occurrences
from tests.servers import free_port
from tests.submit_support import cli_with_inventory, sql_rows
from tests.cli.test_config import run_cli
from tests.worker_support import WorkerProcess, wait_until

FLEET = "[web]\n" + "".join(f"web-{i:02} ansible_host=127.0.0.1\n" for i in range(1, 7))


def settings_with(url: str) -> Settings:
    return load_settings({"redis_url": url}, environ={}, config_path=None)


# ---------------------------------------------------------------------------------- the URL


def test_a_cluster_url_names_its_startup_nodes_and_credentials() -> None:
    parsed = parse_cluster_url("rediss+cluster://ops:s%40cret@10.0.0.1:7000,[::1]:7001,db-3")
    assert parsed.nodes == (("10.0.0.1", 7000), ("::1", 7001), ("db-3", 6379))
    assert (parsed.username, parsed.password, parsed.tls) == ("ops", "s@cret", True)
    assert parse_cluster_url("redis+cluster://h:1/0").tls is False


@pytest.mark.parametrize("url, why", [
    ("redis+cluster://", "names no node"),
    ("redis+cluster://h:99999", "no valid port"),
    ("redis+cluster://:pw@h:1/3", "database 0 only"),
    ("redis+cluster://h:1?db=2", "database 0 only"),
])
def test_a_malformed_cluster_url_is_one_line_naming_the_problem_without_the_password(
        url: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        connect(settings_with(url))
    assert why in str(caught.value)
    assert "pw" not in str(caught.value).replace("***", "")
    assert "redis+cluster://" in (caught.value.hint or "")


def test_a_cluster_url_where_no_node_answers_is_one_redacted_line() -> None:
    url = f"redis+cluster://:gone-s3cret@127.0.0.1:{free_port()}"
    with pytest.raises(RedisUnavailableError) as caught:
        connect(settings_with(url))
    assert str(caught.value).startswith("cannot reach redis at redis+cluster://:***@127.0.0.1:")
    assert "gone-s3cret" not in str(caught.value) and "\n" not in str(caught.value)


def test_status_with_an_unreachable_cluster_fails_the_redis_check_and_goes_on(
        tmp_path: Path) -> None:
    url = f"redis+cluster://:gone-s3cret@127.0.0.1:{free_port()}"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "FLEETSCHED_STATE_DIR": str(tmp_path),
           "FLEETSCHED_REDIS_URL": None, "FLEETSCHED_CONFIG": None, "NO_COLOR": "1"}
    code, out, err = run_cli(["--redis-url", url, "status", "--output", "json"], env=env)
    assert code == 1 and "Traceback" not in out + err
    found = {f["check"]: f for f in json.loads(out)["checks"]}
    assert found["redis"]["level"] == "fail" and "database" in found
    assert found["redis"]["message"].startswith("cannot reach redis at redis+cluster://:***@")
    assert "gone-s3cret" not in out + err


# ------------------------------------------------------------------------ on the cluster


def test_a_cluster_url_gives_a_cluster_client_that_runs_the_queue_scripts(
        cluster_url: str, redis_cluster: RedisCluster) -> None:
    # Given the URL naming one node only: the client finds the three masters
    one = cluster_url.split(",")[0]
    client = connect(settings_with(one))
    try:
        assert isinstance(client, redis.RedisCluster)
        assert len(client.get_primaries()) == 3
        assert client.get_connection_kwargs()["socket_timeout"] == 30.0
        from scheduler.queue.client import Queue, TaskSpec

        assert Queue(client).create_task(TaskSpec("7")) is True
        # the task hash lives on the master of {fs}'s slot
        owner = redis_cluster.master_of("{fs}")
        node = owner.client()
        assert node.hget("{fs}:task:7", "state") is not None
        node.close()
    finally:
        client.close()


def test_a_cluster_with_one_evicting_master_is_refused_naming_that_master(
        cluster_url: str, redis_cluster: RedisCluster) -> None:
    master = redis_cluster.master_of("other-slot-{x}")
    node = master.client()
    node.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with pytest.raises(RedisUnavailableError) as caught:
            connect(settings_with(cluster_url))
        assert f"(master {master.address}) uses maxmemory-policy allkeys-lru" in str(caught.value)
    finally:
        node.config_set("maxmemory-policy", "noeviction")
        node.close()


def test_redis_status_and_doctor_say_it_is_a_cluster_and_show_every_node(
        cluster_url: str, redis_cluster: RedisCluster, tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "FLEETSCHED_STATE_DIR": str(tmp_path),
           "FLEETSCHED_REDIS_URL": None, "FLEETSCHED_CONFIG": None, "NO_COLOR": "1"}
    code, out, err = run_cli(["--redis-url", cluster_url, "redis", "status", "--output", "json"],
                             env=env)
    assert code == 0, err
    status = json.loads(out)
    assert (status["mode"], status["state"], status["masters"], status["replicas"]) == \
        ("cluster", "ok", 3, 3)
    lines = {k: v for k, v in status.items() if k.startswith("node ")}
    assert set(lines) == {f"node {n.address}" for n in redis_cluster.nodes}
    assert sum(v.startswith("master,") for v in lines.values()) == 3
    assert all("aof always" in v and "noeviction" in v for v in lines.values())
    code, out, err = run_cli(["--redis-url", cluster_url, "doctor", "--output", "json"], env=env)
    assert code == 0, err
    found = {f["check"]: f for f in json.loads(out)["checks"]}
    assert found["cluster"]["level"] == "ok"
    assert found["cluster"]["message"].startswith(f"cluster at {cluster_url}, state ok")
    assert found["eviction"]["message"] == "maxmemory-policy noeviction (every node)"
    assert found["redis"]["message"].startswith("6 nodes reachable")


def test_a_worker_node_on_the_cluster_drains_a_task_and_records_every_event_in_sql(
        cluster_url: str, tmp_path: Path) -> None:
    # Given a task of six jobs submitted through the CLI to the cluster
    cli = cli_with_inventory(tmp_path, cluster_url, FLEET)
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=50")
    # When a worker node (with its recorder) runs on the cluster URL
    node = WorkerProcess(cluster_url, tmp_path / "node", [
        "--id", "c1", "--slots", "3", "--processes", "1", "--lease", "5s"],
        env={"FLEETSCHED_DATABASE_URL": cli.database_url}).start()
    try:
        wait_until(lambda: sql_rows(cli.database_url, "SELECT state FROM tasks WHERE id = :t",
                                    t=task) == [("succeeded",)], 60,
                   "the task to succeed in SQL", node.tail, [node])
        wait_until(lambda: _recorded_everything(cli.database_url, cluster_url), 30,
                   "the recorder to catch up", node.tail, [node])
    finally:
        node.stop()
    # Then every job ran once, and the SQL record holds every event of the stream
    client = connect(settings_with(cluster_url))
    try:
        verdict = check(cli.database_url, client)
    finally:
        client.close()
    assert verdict.counts["jobs"] == 6


def test_a_schedule_on_the_cluster_is_armed_fires_once_and_is_removed(
        cluster_url: str, tmp_path: Path) -> None:
    # Given a schedule every second, added through the CLI to the cluster
    cli = cli_with_inventory(tmp_path, cluster_url, FLEET)
    cli.ok("schedules", "add", "beat", "--every", "1s", "command", "-t", "group:web",
           "-p", "cmd=true", "--executor", "simulate")
    client = connect(settings_with(cluster_url))
    try:
        armed = entry_score(client, "beat")
        assert armed is not None
        # When its occurrence is due and a worker claims and fires it
        time.sleep(max(0.0, armed / 1000 - time.time()) + 0.05)
        [result] = fired(client, cli.database_url)
        # Then one task holds the occurrence, and the entry waits for the next one
        assert len(result.tasks) == 1 and occurrences(cli.database_url, "beat") == {armed: 1}
        assert (entry_score(client, "beat") or 0) > armed
        # And removing the schedule takes its entry out (a MULTI on the cluster)
        cli.ok("schedules", "remove", "beat")
        assert entry_score(client, "beat") is None
    finally:
        client.close()


def test_a_window_is_copied_to_the_cluster_and_removed_as_a_tombstone(
        cluster_url: str, tmp_path: Path) -> None:
    # Given a window added through the CLI (copied to Redis in a MULTI)
    cli = cli_with_inventory(tmp_path, cluster_url, FLEET)
    start = (datetime.now(timezone.utc) + timedelta(hours=1)).replace(microsecond=0)
    cli.ok("windows", "add", "tmp", "--start", start.isoformat(), "--duration", "1h")
    client = connect(settings_with(cluster_url))
    try:
        assert client.hget("{fs}:window:tmp", "kind") is not None
        # When it is removed, Then its copy on the cluster is a tombstone
        cli.ok("windows", "remove", "tmp")
        assert list(client.hgetall("{fs}:window:tmp")) == ["removed"]
    finally:
        client.close()


def _recorded_everything(database_url: str, cluster_url: str) -> bool:
    from scheduler.queue.keys import Keys
    from scheduler.record.recorder import backlog

    client = connect(settings_with(cluster_url))
    try:
        lag, pending = backlog(client, Keys().events)
    finally:
        client.close()
    return lag == 0 and pending == 0


# ----------------------------------------------------------------------- script coverage


@pytest.mark.last
@pytest.mark.xdist_group("redis-cluster")  # on the process that ran the cluster tests
def test_the_queue_tests_run_every_lua_script_on_the_cluster(request: pytest.FixtureRequest
                                                             ) -> None:
    from tests.queue_support import SCRIPTS_RUN_ON_CLUSTER

    # Judged when every module whose cluster variants run scripts is in this session (the
    # full suite is; a run of a few of them cannot cover every script)
    queue_tests = Path(__file__).resolve().parents[1] / "queue"
    needed = {f"tests/queue/{p.name}" for p in queue_tests.glob("test_queue_*.py")}
    needed |= {"tests/queue/test_fairshare.py", "tests/redisdb/test_redis_cluster.py"}
    missing = needed - {item.nodeid.split("::")[0] for item in request.session.items}
    if missing:
        pytest.skip(f"judged with the cluster tests of {', '.join(sorted(missing))} too")
    # Then every script was loaded on the flushed cluster by a test that ran it (the
    # cluster_url fixture records them after each test)
    assert sorted(set(VERBS) - SCRIPTS_RUN_ON_CLUSTER) == []
