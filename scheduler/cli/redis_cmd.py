"""``fleetsched redis status|start|stop``: the Redis fleetsched uses.

Thin commands over ``scheduler.redisdb.embedded`` and ``scheduler.redisdb.connect``: ``status`` works for the
embedded server and a configured ``redis_url`` alike (passwords redacted); ``start`` and ``stop``
manage only the embedded server. With a queue in N shards (``queue_shards``), ``status`` also
names the shards (on a cluster: the node serving each) and the shard count Redis holds.
"""

from __future__ import annotations

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.cli.output import OutputOption
from scheduler.config import Settings
from scheduler.errors import ConfigError
from scheduler.redact import redact_url
from scheduler.redisdb import embedded
from scheduler.redisdb.connect import connect, server_status

redis_app = typer.Typer(help="The Redis server fleetsched queues jobs in (embedded by default).",
                        no_args_is_help=True)


def _embedded_only(settings: Settings, verb: str) -> None:
    if settings.redis_url:
        raise ConfigError(
            f"redis_url is set ({redact_url(settings.redis_url)}): fleetsched does not {verb} "
            "a Redis it does not own",
            hint="manage that server yourself, or unset redis_url to use the embedded one")


@redis_app.command()
def status(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """Show whether Redis runs: pid, address, version, AOF fsync, memory, eviction policy."""
    settings = state(ctx).settings
    info = server_status(settings)
    if settings.queue_shards > 1 and info.get("state") in ("running", "ok"):
        info.update(_shards_status(settings))
    output.emit_object(info, fmt)


def _shards_status(settings: Settings) -> dict[str, str]:
    """The queue's shards: the count set and the one Redis holds, each shard's key tag and, on
    a cluster, the node serving it. Never starts the embedded server (it runs already)."""
    import redis

    from scheduler.queue.shards import shards_of
    from scheduler.redisdb.cluster import is_cluster_client

    shards = shards_of(settings)
    client = connect(settings, check=False)
    try:
        stored = client.get(shards.count_key)
        nodes = ([client.get_node_from_key(k.tag).name for k in shards.all]
                 if is_cluster_client(client) else [""] * shards.count)
    except redis.RedisError:
        return {"queue_shards": str(shards.count)}
    finally:
        client.close()
    stored = stored.decode() if isinstance(stored, bytes) else stored
    out = {"queue_shards": f"{shards.count} (Redis holds {stored or 'none yet'})"}
    for i, (keys, node) in enumerate(zip(shards.all, nodes)):
        out[f"shard {i}"] = keys.tag + (f" on {node}" if node else "")
    return out


@redis_app.command()
def start(ctx: typer.Context) -> None:
    """Start the embedded Redis (or find it already running) and check it."""

    settings = state(ctx).settings
    _embedded_only(settings, "start")
    connect(settings).close()
    info = embedded.status(settings)
    output.info(f"embedded redis running: pid {info.get('pid')}, {info.get('address')}")


@redis_app.command()
def stop(ctx: typer.Context) -> None:
    """Stop the embedded Redis cleanly (SHUTDOWN flushes its append-only file)."""

    settings = state(ctx).settings
    _embedded_only(settings, "stop")
    pid = embedded.stop(settings)
    output.info(f"embedded redis stopped (pid {pid})" if pid else "embedded redis was not running")
