"""What a command opens from the settings, closed again when the command ends.

- :func:`database`: the database engine and the operator's name (hosts, groups);
- :func:`stores`: the same plus a way to connect to Redis and the key names (windows,
  schedules), for commands that write SQL and then arm or sync something in the queue.

The settings come from the root callback's state (``scheduler.cli.app.state``), imported at
call time because app.py imports the command modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from sqlalchemy.engine import Engine

if TYPE_CHECKING:
    from scheduler.keys import Keys


@contextmanager
def database(ctx: typer.Context) -> Iterator[tuple[Engine, str]]:
    """(engine, operator); the engine is disposed of afterwards."""
    from scheduler.cli.app import state
    from scheduler.inventory import open_database

    settings = state(ctx).settings
    engine = open_database(settings)
    try:
        yield engine, settings.operator
    finally:
        engine.dispose()


@contextmanager
def stores(ctx: typer.Context) -> Iterator[tuple[Engine, Callable[[], Any], Keys, str]]:
    """(engine, connect, keys, operator): ``connect()`` opens a Redis client only when called."""
    from scheduler.cli.app import state
    from scheduler.keys import Keys
    from scheduler.redis_conn import connect

    settings = state(ctx).settings
    with database(ctx) as (engine, operator):
        yield engine, (lambda: connect(settings)), Keys(settings.queue_prefix), operator
