"""Connecting to Redis from settings, and refusing a Redis that could lose queued jobs.

``connect(settings)`` is the one way every part of fleetsched gets a Redis client:

1. No ``redis_url``: start or reuse the embedded private server (``scheduler.redisdb.embedded``).
2. A ``redis_url``: ``redis.Redis.from_url`` with connect/read timeouts, TCP keepalive (TCP
   URLs only: ``unix://`` sockets take no keepalive option) and periodic health checks, so a
   dead server is noticed instead of hanging a worker. A ``redis+cluster://`` URL gives a
   ``redis.cluster.RedisCluster`` with the same timeouts (``scheduler.redisdb.cluster``).
3. PING it; a refused, timed-out or unauthenticated connection becomes one
   ``RedisUnavailableError`` line naming the redacted URL.
4. Refuse any server whose ``maxmemory-policy`` is not ``noeviction``: an evicted job is a lost
   job. The policy comes from ``CONFIG GET``, or from ``INFO memory`` where a managed Redis
   forbids CONFIG. On a cluster every master is asked, and each must say ``noeviction``.
"""

from __future__ import annotations

from typing import Any

import redis

from scheduler.config import Settings
from scheduler.errors import ConfigError, RedisUnavailableError, RedisUnsafeError
from scheduler.redact import redact_exception, redact_url
from scheduler.redisdb import cluster, embedded

__all__ = ["REDIS_ERRORS", "check_eviction_policy", "connect", "display_url", "eviction_policy",
           "is_permanent", "server_status"]

CONNECT_TIMEOUT_S = 5.0
# Longer than any blocking read the queue issues; a server silent for this long is gone.
SOCKET_TIMEOUT_S = 30.0
HEALTH_CHECK_INTERVAL_S = 30
# Error replies that go away by themselves: a server loading its data, busy with a script,
# demoted to a replica in a failover, a cluster resharding, or full until someone frees memory.
TRANSIENT_REPLIES = ("LOADING", "BUSY", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN",
                     "OOM", "MOVED", "ASK")
# redis-py turns most of those replies into classes of their own and drops the code from the
# message ("READONLY You can't write..." becomes ReadOnlyError("You can't write...")).
TRANSIENT_ERRORS = (redis.exceptions.ReadOnlyError, redis.exceptions.TryAgainError,
                    redis.exceptions.ClusterDownError, redis.exceptions.OutOfMemoryError,
                    redis.exceptions.MovedError, redis.exceptions.AskError)


REDIS_ERRORS: tuple[type[Exception], ...] = (redis.RedisError,
                                             redis.exceptions.RedisClusterException)
"""What a Redis call may raise: redis-py's errors, and a cluster client's own, which is no
RedisError (``Redis Cluster cannot be connected`` while no node of the cluster answers)."""


def is_permanent(exc: BaseException) -> bool:
    """True when retrying ``exc`` cannot help: a permission or authentication refusal (a Redis
    user that may not run scripts), or an error reply that is not one of the transient ones.
    A lost connection or a timeout is never permanent."""
    refused = (redis.exceptions.NoPermissionError, redis.exceptions.AuthorizationError,
               redis.exceptions.AuthenticationError)
    if isinstance(exc, refused):
        return True
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, *TRANSIENT_ERRORS)):
        return False
    if isinstance(exc, redis.ResponseError):
        return not str(exc).upper().startswith(TRANSIENT_REPLIES)
    return False


def display_url(settings: Settings) -> str:
    """The Redis URL as it may be printed: redacted, or where the embedded server listens."""
    if settings.redis_url:
        return redact_url(settings.redis_url)
    endpoint = embedded.Embedded.of(settings).read_endpoint()
    if endpoint is not None:
        return redact_url(endpoint.url)
    return f"unix://{embedded.Embedded.of(settings).socket_path} (embedded, not started)"


def _client_for_url(url: str, socket_timeout: float | None) -> Any:
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": socket_timeout,
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
    }
    # TCP keepalive only for TCP: a unix socket connection refuses the option (TypeError at
    # the first command), and a local socket has no idle middlebox to keep alive through.
    if not url.lower().startswith("unix:"):
        options["socket_keepalive"] = True
    if cluster.is_cluster_url(url):
        return _cluster_client(url, options)
    try:
        return redis.Redis.from_url(url, **options)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"redis_url {redact_url(url)!r} is not usable: "
                          f"{redact_exception(exc, url)}",
                          hint="redis://[:password@]host:port/db, rediss://... or "
                          "unix:///path/to/socket") from None


def _cluster_client(url: str, options: dict[str, Any]) -> Any:
    cluster.parse_cluster_url(url)  # a malformed URL is a ConfigError before any connection
    try:
        return cluster.cluster_client(url, options)
    # No startup node answered (RedisClusterException), or one refused the credentials.
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        raise _unavailable(exc, redact_url(url), url) from None


def eviction_policy(client: redis.Redis) -> str | None:
    """The server's ``maxmemory-policy``: CONFIG GET, else INFO memory (managed Redis often
    forbids CONFIG); None if neither tells. ``client`` is one server (on a cluster: one node,
    see :func:`check_eviction_policy`)."""
    try:
        value = client.config_get("maxmemory-policy").get("maxmemory-policy")
        if value:
            return str(value)
    except redis.ResponseError:  # NOPERM, or CONFIG renamed/disabled by the provider
        pass
    try:
        value = client.info("memory").get("maxmemory_policy")
    except redis.ResponseError:
        return None
    return str(value) if value else None


def check_eviction_policy(client: Any, shown_url: str) -> None:
    """Raise RedisUnsafeError unless the server (every master of a cluster) is known not to
    evict keys."""
    if cluster.is_cluster_client(client):
        for address, node in cluster.masters(client):
            check_eviction_policy(node, f"{shown_url} (master {address})")
        return
    policy = eviction_policy(client)
    if policy == "noeviction":
        return
    if policy is None:
        raise RedisUnsafeError(
            f"redis at {shown_url} does not say its maxmemory-policy (CONFIG GET and INFO "
            "memory are both refused), so it may evict queued jobs",
            hint="allow INFO for this user, and set maxmemory-policy noeviction")
    raise RedisUnsafeError(
        f"redis at {shown_url} uses maxmemory-policy {policy}, which may evict queued jobs: "
        "an evicted job is a lost job",
        hint="set maxmemory-policy noeviction (redis.conf, or your provider's parameter group)")


def _unavailable(exc: Exception, shown_url: str, url: str | None) -> RedisUnavailableError:
    detail = redact_exception(exc, url)
    if isinstance(exc, redis.AuthenticationError):
        return RedisUnavailableError(f"redis at {shown_url} refused the credentials: {detail}",
                                     hint="check the user and password in redis_url")
    return RedisUnavailableError(f"cannot reach redis at {shown_url}: {detail}",
                                 hint="start the server, or fix redis_url "
                                 "(fleetsched config show prints the one in use)")


def connect(settings: Settings, *, socket_timeout: float | None = SOCKET_TIMEOUT_S,
            check: bool = True) -> redis.Redis:
    """A client (``decode_responses=True``) for the configured Redis, checked to be reachable
    and not to evict keys. Starts the embedded server when no ``redis_url`` is set. A cluster
    URL gives a ``RedisCluster``, which answers the same commands the queue uses."""
    url = settings.redis_url
    if url is None:
        endpoint = embedded.ensure_running(settings)
        client = endpoint.client(socket_timeout=socket_timeout, socket_keepalive=True,
                                 health_check_interval=HEALTH_CHECK_INTERVAL_S)
        shown, secret_url = redact_url(endpoint.url), endpoint.url
    else:
        client = _client_for_url(url, socket_timeout)
        shown, secret_url = redact_url(url), url
    if not check:
        return client
    try:
        client.ping()
        check_eviction_policy(client, shown)
    except redis.RedisError as exc:
        client.close()
        raise _unavailable(exc, shown, secret_url) from None
    except RedisUnavailableError:
        client.close()
        raise
    return client


def server_status(settings: Settings) -> dict[str, Any]:
    """What ``fleetsched redis status`` shows: the embedded server's state, or the configured
    server's version, persistence and eviction policy (on a cluster: one line per node).
    Never starts anything."""
    if settings.redis_url is None:
        return embedded.status(settings)
    client = connect(settings, check=False)
    shown = redact_url(settings.redis_url)
    try:
        if cluster.is_cluster_client(client):
            return _cluster_status(client, shown)
        info, policy, fsync = _node_status(client)
    except redis.RedisError as exc:
        raise _unavailable(exc, shown, settings.redis_url) from None
    finally:
        client.close()
    return {"mode": "external", "state": "running", "url": shown,
            "pid": info.get("process_id"), "version": info.get("redis_version"),
            "appendonly": "yes" if info.get("aof_enabled") else "no", "appendfsync": fsync,
            "used_memory": info.get("used_memory_human"), "maxmemory_policy": policy,
            "queue_safe": "yes" if policy == "noeviction" else "no (may evict jobs)"}


def _node_status(client: redis.Redis) -> tuple[dict[str, Any], str | None, str | None]:
    """(INFO, maxmemory-policy, appendfsync) of one server."""
    info = client.info()
    policy = eviction_policy(client)
    try:
        fsync = client.config_get("appendfsync").get("appendfsync")
    except redis.ResponseError:
        fsync = None
    return info, policy, fsync


def _cluster_status(client: Any, shown: str) -> dict[str, Any]:
    """The cluster's state and one line per node (role, version, persistence, eviction)."""
    lines: dict[str, str] = {}
    versions: set[str] = set()
    roles = cluster.nodes(client)
    safe = True
    for address, role in roles:
        node = cluster.node_client(client, address)
        try:
            info, policy, fsync = _node_status(node)
        except redis.RedisError as exc:
            lines[f"node {address}"] = f"{role}, unreachable: {redact_exception(exc)}"
            safe = False
            continue
        finally:
            node.close()
        versions.add(str(info.get("redis_version")))
        aof = f"aof {fsync or '?'}" if info.get("aof_enabled") else "aof off"
        safe = safe and policy == "noeviction"
        lines[f"node {address}"] = (f"{role}, pid {info.get('process_id')}, "
                                    f"{info.get('used_memory_human')}, {aof}, "
                                    f"maxmemory-policy {policy}")
    state = client.cluster_info().get("cluster_state", "?")
    return {"mode": "cluster", "state": state, "url": shown,
            "version": ", ".join(sorted(versions)),
            "masters": sum(r == "master" for _, r in roles),
            "replicas": sum(r == "replica" for _, r in roles),
            "queue_safe": "yes" if safe else "no (a node may evict jobs, or is unreachable)",
            **lines}
