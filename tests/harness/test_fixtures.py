"""The fixtures start real servers: a sanity check that every later test can lean on."""

import redis
import sqlalchemy as sa


def test_the_session_redis_is_a_real_server_with_noeviction(redis_client: redis.Redis) -> None:
    info = redis_client.info("server")
    assert info["redis_version"]
    assert redis_client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"


def test_a_private_redis_survives_kill_minus_nine_with_aof_always(private_redis) -> None:
    private_redis.restart(appendonly=True)
    client = redis.Redis.from_url(private_redis.url)
    client.set("k", "v")
    private_redis.kill()
    private_redis.start()
    client = redis.Redis.from_url(private_redis.url)
    assert client.get("k") == b"v"


def test_postgres_is_a_real_server(postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url)
    with engine.connect() as conn:
        version = conn.execute(sa.text("select version()")).scalar_one()
    engine.dispose()
    assert version.startswith("PostgreSQL")


def test_the_cluster_has_three_masters_each_with_a_replica_and_can_fail_over_and_back(
        redis_cluster, cluster_url: str) -> None:
    roles = sorted(node.role() for node in redis_cluster.nodes)
    assert roles == ["master"] * 3 + ["slave"] * 3
    assert all(node.cluster_info()["cluster_slots_ok"] == "16384" for node in redis_cluster.nodes)
    # A clean failover of the queue's master to its replica, then back
    master = redis_cluster.master_of("{fs}")
    replica = redis_cluster.replica_of(master)
    redis_cluster.failover(replica)
    assert redis_cluster.master_of("{fs}") is replica and master.role() == "slave"
    redis_cluster.failover(master)
    assert redis_cluster.master_of("{fs}") is master
    # A replica killed -9 rejoins when started again
    redis_cluster.restart(replica)
    assert replica.role() == "slave" and redis_cluster.replica_of(master) is replica
