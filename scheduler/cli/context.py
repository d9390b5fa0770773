"""The state every command shares, and what a command opens from the settings.

- :class:`State` and :func:`state`: the global options of the root callback and the settings
  built from them once, found from any command's context;
- :func:`database`: the database engine and the operator's name, for a command that is no
  operator verb (``notify list``);
- :func:`verbs_of`: the ``Stores`` and the acting ``Principal`` an operator verb takes
  (``scheduler.verbs``);
- :func:`queue_client`: a Redis client, for the commands that run a node or the recorder.

Every command module imports what it needs from here at the top; nothing imports
``scheduler.cli.app`` but the entry points, so the CLI has no import circle.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scheduler.config import Settings, load_settings

if TYPE_CHECKING:  # SQLAlchemy loads when a command opens the database, not with the CLI
    from sqlalchemy.engine import Engine

    from scheduler.principal import Principal
    from scheduler.verbs.stores import Stores

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


def verbs_of(ctx: typer.Context) -> tuple[Stores, Principal]:
    """What an operator verb takes: the stores of the settings, and the local operator (the
    settings' ``operator``: ``--as``, ``$FLEETSCHED_OPERATOR`` or the OS user)."""
    from scheduler.principal import Principal
    from scheduler.verbs.stores import Stores

    settings = state(ctx).settings
    return Stores(settings), Principal.local(settings)


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
    """``connect(settings)`` for a command that reads or writes the queue (``Stores.connect``:
    also refuses a ``queue_shards`` other than the queue's)."""
    from scheduler.verbs.stores import Stores

    return Stores(settings).connect(**options)

