"""connect(settings) against real servers: a configured URL, a Redis that may evict keys (refused,
through CONFIG GET or, where CONFIG is forbidden, INFO memory), and a Redis that is not there
(one redacted line and exit code 1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler.config import Settings, load_settings
from scheduler.errors import ConfigError, RedisUnavailableError
from scheduler.redisdb.connect import connect, eviction_policy
from tests.servers import RedisServer, free_port, start_redis
from tests.cli.test_config import run_cli


def settings_with(url: str) -> Settings:
    return load_settings({"redis_url": url}, environ={}, config_path=None)


@pytest.fixture
def evicting_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server started with maxmemory-policy allkeys-lru and a password."""
    server = start_redis(tmp_path, maxmemory_policy="allkeys-lru", password="lru-s3cret")
    yield server
    server.kill()


def test_a_configured_url_gives_a_decoding_client_with_timeouts_and_health_checks(
    redis_url: str,
) -> None:
    client = connect(settings_with(redis_url))
    client.set("k", "v")
    assert client.get("k") == "v"
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_connect_timeout"] == 5.0
    assert kwargs["socket_timeout"] == 30.0
    assert kwargs["health_check_interval"] == 30
    client.close()


def test_a_redis_that_may_evict_keys_is_refused_naming_the_policy(
    evicting_redis: RedisServer,
) -> None:
    with pytest.raises(RedisUnavailableError) as caught:
        connect(settings_with(evicting_redis.url))
    message = str(caught.value)
    assert message == (
        f"redis at redis://:***@127.0.0.1:{evicting_redis.port}/0 uses maxmemory-policy "
        "allkeys-lru, which may evict queued jobs: an evicted job is a lost job")
    assert "set maxmemory-policy noeviction" in (caught.value.hint or "")


def test_where_config_is_forbidden_the_policy_is_read_from_info_memory(
    evicting_redis: RedisServer,
) -> None:
    # Given a user who may not run CONFIG, as on a managed Redis
    admin = redis.Redis.from_url(evicting_redis.url)
    admin.acl_setuser("app", enabled=True, passwords=["+app-s3cret"], keys=["*"],
                      channels=["*"], commands=["+@all", "-config"])
    admin.close()
    url = f"redis://app:app-s3cret@127.0.0.1:{evicting_redis.port}/0"
    probe = redis.Redis.from_url(url, decode_responses=True)
    with pytest.raises(redis.exceptions.NoPermissionError):
        probe.config_get("maxmemory-policy")
    # Then the policy is still found, and the server still refused
    assert eviction_policy(probe) == "allkeys-lru"
    probe.close()
    with pytest.raises(RedisUnavailableError, match="uses maxmemory-policy allkeys-lru") as caught:
        connect(settings_with(url))
    assert "app-s3cret" not in str(caught.value)


def test_a_noeviction_redis_is_accepted_even_when_config_is_forbidden(
    private_redis: RedisServer,
) -> None:
    admin = redis.Redis.from_url(private_redis.url)
    admin.acl_setuser("app", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
                      commands=["+@all", "-config"])
    admin.close()
    client = connect(settings_with(f"redis://app:pw@127.0.0.1:{private_redis.port}/0"))
    assert client.ping() is True
    client.close()


def test_a_policy_changed_at_runtime_is_refused_at_the_next_connect(
    private_redis: RedisServer,
) -> None:
    connect(settings_with(private_redis.url)).close()
    admin = redis.Redis.from_url(private_redis.url)
    admin.config_set("maxmemory-policy", "volatile-ttl")
    admin.close()
    with pytest.raises(RedisUnavailableError, match="volatile-ttl"):
        connect(settings_with(private_redis.url))


def test_connection_refused_is_one_line_with_the_url_redacted() -> None:
    url = f"redis://:gone-s3cret@127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailableError) as caught:
        connect(settings_with(url))
    message = str(caught.value)
    assert message.startswith("cannot reach redis at redis://:***@127.0.0.1:")
    assert "Connection refused" in message
    assert "gone-s3cret" not in message and "\n" not in message


def test_a_wrong_password_is_one_line_without_the_password(
    evicting_redis: RedisServer,
) -> None:
    url = f"redis://:wrong-s3cret@127.0.0.1:{evicting_redis.port}/0"
    with pytest.raises(RedisUnavailableError, match="refused the credentials") as caught:
        connect(settings_with(url))
    assert "wrong-s3cret" not in str(caught.value)


def test_an_unusable_url_scheme_is_a_config_error_without_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        connect(settings_with("http://:web-s3cret@example.invalid/0"))
    assert "web-s3cret" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_the_cli_reports_an_unreachable_redis_on_one_line_and_exits_1() -> None:
    url = f"redis://:gone-s3cret@127.0.0.1:{free_port()}/0"
    code, out, err = run_cli(["--redis-url", url, "redis", "status"])
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: cannot reach redis at redis://:***@127.0.0.1:")
    assert lines[1].startswith("hint: ")
    assert len(lines) == 2
    assert "gone-s3cret" not in err


def test_redis_status_of_an_external_server_shows_its_policy_and_no_password(
    evicting_redis: RedisServer,
) -> None:
    code, out, err = run_cli(["--redis-url", evicting_redis.url, "redis", "status", "-o", "json"])
    assert code == 0, err
    assert "lru-s3cret" not in out + err
    shown = json.loads(out)
    assert shown["mode"] == "external"
    assert shown["url"] == f"redis://:***@127.0.0.1:{evicting_redis.port}/0"
    assert shown["maxmemory_policy"] == "allkeys-lru"
    assert shown["queue_safe"].startswith("no")


def test_start_and_stop_refuse_a_redis_fleetsched_does_not_own(redis_url: str) -> None:
    for verb in ("start", "stop"):
        code, _, err = run_cli(["--redis-url", redis_url, "redis", verb])
        assert code == 2
        assert "does not own" in err
