"""``fleetsched redis status|start|stop``: the Redis fleetsched uses.

Thin commands over ``scheduler.redisdb.embedded`` and ``scheduler.redisdb.connect``: ``status`` works for the
embedded server and a configured ``redis_url`` alike (passwords redacted); ``start`` and ``stop``
manage only the embedded server.
"""

from __future__ import annotations

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.cli.output import OutputOption
from scheduler.config import Settings, redact_url
from scheduler.errors import ConfigError
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

    output.emit_object(server_status(state(ctx).settings), fmt)


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
