"""The state every command shares, and what a command opens from the settings.

- :class:`State` and :func:`state`: the global options of the root callback and the settings
  built from them once, found from any command's context;
- :func:`database`: the database engine and the operator's name (hosts, groups);
- :func:`stores`: the same plus a way to connect to Redis and the queue's shards (windows go
  to every shard, schedules to shard 0), for commands that write SQL and then arm or sync
  something in the queue.

Every command module imports what it needs from here at the top; nothing imports
``scheduler.cli.app`` but the entry points, so the CLI has no import circle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scheduler.config import Settings, load_settings

if TYPE_CHECKING:  # SQLAlchemy loads when a command opens the database, not with the CLI
    from sqlalchemy.engine import Engine

    from scheduler.queue.shards import Shards

class State:
    """Per-invocation state: the global options, and settings built once on first use."""

    def __init__(self, overrides: dict[str, Any], config_path: Path | None) -> None:
        self.overrides = overrides
        self.config_path = config_path
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.overrides, config_path=self.config_path)
        return self._settings


def state(ctx: typer.Context) -> State:
    """The invocation state from any command's context."""
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        root.obj = State({}, None)
    return root.obj


@contextmanager
def database(ctx: typer.Context) -> Iterator[tuple[Engine, str]]:
    """(engine, operator); the engine is disposed of afterwards."""
    from scheduler.record.session import open_database

    settings = state(ctx).settings
    engine = open_database(settings)
    try:
        yield engine, settings.operator
    finally:
        engine.dispose()


def queue_client(settings: Any, **options: Any) -> Any:
    """``connect(settings)`` for a command that reads or writes the queue: also refuses, in one
    line, a ``queue_shards`` other than the queue's (a task written to the wrong shard would be
    invisible to every node)."""
    from scheduler.queue.sharded import check_shard_count
    from scheduler.queue.shards import shards_of
    from scheduler.redisdb.connect import connect

    client = connect(settings, **options)
    try:
        check_shard_count(client, shards_of(settings))
    except BaseException:
        client.close()
        raise
    return client


@contextmanager
def stores(ctx: typer.Context) -> Iterator[tuple[Engine, Callable[[], Any], Shards, str]]:
    """(engine, connect, shards, operator): ``connect()`` opens a Redis client only when
    called; ``shards``: the queue's (``scheduler.queue.route`` sends each write where it goes)."""
    from scheduler.queue.shards import shards_of

    settings = state(ctx).settings
    with database(ctx) as (engine, operator):
        yield engine, (lambda: queue_client(settings)), shards_of(settings), operator


def push_host_freezes(ctx: typer.Context, engine: Any) -> None:
    """After the inventory changed: a host that joined a frozen group holds its queued jobs at
    once (``scheduler.windows.freezes``). Only when a freeze exists; Redis being down is one
    warning line."""
    from scheduler.cli import output
    from scheduler.queue.shards import shards_of
    from scheduler.windows.freezes import push_or_warn

    settings = state(ctx).settings
    warning = push_or_warn(engine, lambda: queue_client(settings), shards_of(settings),
                           if_any=True)
    if warning:
        output.info(f"warning: {warning}")


def push_group_limits(ctx: typer.Context, engine: Any, operator: str, *,
                      always: bool = False) -> None:
    """After the inventory changed (an import, a host added or removed, a group removed): a P%
    group limit follows its group's new size, hosts that joined or left a limited group count
    right, and a removed group's limit goes (``group_limits.push``). Only when a group has a
    limit, or ``always``; Redis being down is one warning line."""
    import redis

    from scheduler.cli import output
    from scheduler.errors import FleetschedError
    from scheduler.inventory import group_limits as limits_in_sql
    from scheduler.queue.client import Queue
    from scheduler.queue.shards import shards_of
    from scheduler.record.session import transaction
    from scheduler.submission import group_limits

    with transaction(engine, commit=False) as session:
        if not limits_in_sql(session) and not always:
            return
    settings = state(ctx).settings
    try:
        client = queue_client(settings)
        shards = shards_of(settings)
        queue = Queue(client, shards.coord)
        try:
            changed = group_limits.push(engine, queue, operator, shards=shards)
        finally:
            queue.close()
            client.close()
    except (redis.RedisError, OSError, FleetschedError) as exc:
        output.info(f"warning: group limits not updated in Redis ({type(exc).__name__}): run "
                    "`fleetsched reconcile` when it is back")
        return
    if changed:
        output.info(f"group limits: {changed} updated in Redis")
