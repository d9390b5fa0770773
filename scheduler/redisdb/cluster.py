"""Redis Cluster: the ``redis+cluster://`` URL, its client, and the commands that go per node.

1. :func:`is_cluster_url` / :func:`parse_cluster_url`: ``redis+cluster://[user:pass@]host:port
   [,host:port...]`` (``rediss+cluster://`` for TLS) names the startup nodes; the client finds
   the rest of the cluster from any of them.
2. :func:`cluster_client`: a ``redis.cluster.RedisCluster`` with the same decoding and timeouts
   as the single-server client.
3. :func:`masters`: one plain client per master, for what must be asked of each master (the
   eviction policy): CONFIG and INFO answer for one node only. :func:`nodes` lists every node
   with its role from ``CLUSTER NODES`` (``CLUSTER SLOTS``, which the client reads, leaves out
   a replica that has not replicated a byte yet), and :func:`node_client` reaches any of them.

The Redis clock the queue reads is the clock of the master of its slot, where its scripts run
(``scheduler.queue.presence.redis_now_ms``).

Every key of a queue shard shares its hash tag (``scheduler.queue.keys``), so each script and
each pipeline of the queue touches one slot and runs unchanged on a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis
from redis.cluster import ClusterNode, RedisCluster

from scheduler.errors import ConfigError
from scheduler.redact import redact_url

__all__ = ["ClusterUrl", "cluster_client", "is_cluster_client", "is_cluster_url", "masters",
           "node_client", "nodes", "parse_cluster_url"]

SCHEMES = {"redis+cluster": False, "rediss+cluster": True}  # scheme -> TLS
DEFAULT_PORT = 6379
USAGE = "redis+cluster://[user:password@]host:port[,host:port...] (rediss+cluster:// for TLS)"


@dataclass(frozen=True)
class ClusterUrl:
    """A parsed cluster URL: the startup nodes and the credentials every node shares."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False


def is_cluster_url(url: str | None) -> bool:
    return url is not None and url.split("://", 1)[0].lower() in SCHEMES


def is_cluster_client(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def _bad(url: str, why: str) -> ConfigError:
    return ConfigError(f"redis_url {redact_url(url)!r} is not usable: {why}", hint=USAGE)


def _node(url: str, text: str) -> tuple[str, int]:
    if text.startswith("["):  # [::1]:7000
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else rest
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, ""
    if not host:
        raise _bad(url, f"node {text!r} has no host")
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65_536:
        raise _bad(url, f"node {text!r} has no valid port")
    return host, int(port_text)


def parse_cluster_url(url: str) -> ClusterUrl:
    """The startup nodes and credentials of a ``redis+cluster://`` URL; ConfigError if wrong."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in SCHEMES:
        raise _bad(url, f"the scheme is not one of {', '.join(SCHEMES)}")
    netloc, sep, tail = rest.partition("/")
    for mark in ("?", "#"):
        if mark in netloc:
            netloc, _, after = netloc.partition(mark)
            tail = mark + after
            sep = ""
    if tail.strip("/") not in ("", "0") or (not sep and tail):
        raise _bad(url, "a cluster has database 0 only and takes no options after the nodes")
    userinfo, _, hosts = netloc.rpartition("@")
    username = password = None
    if userinfo:
        user_text, colon, pass_text = userinfo.partition(":")
        username = unquote(user_text) or None
        password = unquote(pass_text) if colon else None
    nodes = tuple(_node(url, part.strip()) for part in hosts.split(",") if part.strip())
    if not nodes:
        raise _bad(url, "it names no node")
    return ClusterUrl(nodes, username, password, SCHEMES[scheme.lower()])


def cluster_client(url: str, options: dict[str, Any]) -> RedisCluster:
    """A RedisCluster client for ``url`` with the connection ``options`` of a single client."""
    parsed = parse_cluster_url(url)
    kwargs = {k: v for k, v in options.items() if k != "health_check_interval"}
    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in parsed.nodes],
                        username=parsed.username, password=parsed.password, ssl=parsed.tls,
                        **kwargs)


def masters(client: RedisCluster) -> list[tuple[str, redis.Redis]]:
    """(address, plain client) of every master the cluster client knows now; the clients are
    the cluster client's own connections to each node (closed with it)."""
    return [(node.name, client.get_redis_connection(node)) for node in client.get_primaries()]


def nodes(client: RedisCluster) -> list[tuple[str, str]]:
    """(address, ``master`` / ``replica`` / ``failed``) of every node, sorted by address."""
    out = []
    for address, node in client.cluster_nodes().items():
        flags = str(node.get("flags", "")).split(",")
        role = ("failed" if "fail" in flags or "noaddr" in flags
                else "master" if "master" in flags else "replica")
        out.append((address.split("@", 1)[0], role))
    return sorted(out)


def node_client(client: RedisCluster, address: str) -> redis.Redis:
    """A plain client of one node, with the cluster client's options (close it after use)."""
    host, _, port = address.rpartition(":")
    return redis.Redis(host=host.strip("[]"), port=int(port), **client.get_connection_kwargs())
