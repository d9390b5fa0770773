"""The state every command shares, and what a command opens from the settings.

- :class:`State` and :func:`state`: the global options of the root callback and the settings
  built from them once, found from any command's context;
- :func:`database`: the database engine and the operator's name, for a command that is no
  operator verb (``notify list``);
- :func:`verbs_of`: the ``Stores`` and the acting ``Principal`` an operator verb takes
  (``scheduler.verbs``);
- :func:`verbs`: one area's verbs with what they take, local (``scheduler.verbs``) or, in
  remote mode (``--server``, the ``server`` setting), over the HTTP API
  (``scheduler.remote``), so a command's code is the same in both modes. In remote mode
  anything else that needs the settings (the database, Redis) is refused in one line: a
  command is never run locally against what the caller meant to be a remote deployment;
- :func:`queue_client`: a Redis client, for the commands that run a node or the recorder.

Every command module imports what it needs from here at the top; nothing imports
``scheduler.cli.app`` but the entry points, so the CLI has no import circle.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import typer

from scheduler.config import Settings, load_settings
from scheduler.errors import ValidationError

if TYPE_CHECKING:  # SQLAlchemy loads when a command opens the database, not with the CLI
    from sqlalchemy.engine import Engine

    from scheduler.principal import Principal
    from scheduler.remote.client import Client
    from scheduler.verbs.stores import Stores

# The areas of scheduler.verbs that scheduler.remote mirrors.
REMOTE_AREAS = ("follow", "inventory", "liveoutput", "reports", "schedules", "status", "submit",
                "tasks", "templates", "tenants", "tokens", "windows")


class State:
    """Per-invocation state: the global options, and settings built once on first use."""

    def __init__(self, overrides: dict[str, Any], config_path: Path | None) -> None:
        self.overrides = overrides
        self.config_path = config_path
        self._settings: Settings | None = None
        self._client: Client | None = None
        self.command_path: str | None = None  # the command run (``state`` notes it)
        self.root: typer.Context | None = None

    def loaded(self) -> Settings:
        """The settings, whatever the mode."""
        if self._settings is None:
            self._settings = load_settings(self.overrides, config_path=self.config_path)
        return self._settings

    @property
    def remote(self) -> bool:
        return self.loaded().server is not None

    @property
    def settings(self) -> Settings:
        """The settings of direct mode: refused in remote mode (see the module docstring)."""
        settings = self.loaded()
        if settings.server is not None:
            command = self.command_path or "this command"
            raise ValidationError(
                f"{command} needs direct mode (the database and Redis credentials); it is "
                f"not available through a server ({settings.server})",
                hint="run it where the deployment's settings are, without --server and "
                     "FLEETSCHED_SERVER")
        return settings

    def client(self) -> Client:
        """The remote mode's connection to the server, made once (``--as`` is refused: the
        server records the token's owner)."""
        if self._client is None:
            from scheduler.remote.client import Client

            if self.overrides.get("operator") is not None:
                raise ValidationError(
                    "--as is not available through a server: the server records the API "
                    "token's owner", hint="drop --as (or use a token of that person)")
            self._client = Client(self.loaded())
            if self.root is not None:  # closed with the command, whatever its end
                self.root.call_on_close(self._client.close)
        return self._client


def state(ctx: typer.Context) -> State:
    """The invocation state from any command's context."""
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        root.obj = State({}, None)
    root.obj.command_path, root.obj.root = ctx.command_path, root
    return root.obj


def verbs_of(ctx: typer.Context) -> tuple[Stores, Principal]:
    """What an operator verb takes: the stores of the settings, and the local operator (the
    settings' ``operator``: ``--as``, ``$FLEETSCHED_OPERATOR`` or the OS user)."""
    from scheduler.principal import Principal
    from scheduler.verbs.stores import Stores

    settings = state(ctx).settings
    return Stores(settings), Principal.local(settings)


def verbs(ctx: typer.Context, area: str) -> tuple[ModuleType, Any, Principal | None]:
    """(the verbs of ``area``, the stores they take, the acting principal): in direct mode
    ``scheduler.verbs.<area>``, ``Stores`` and the local operator; in remote mode
    ``scheduler.remote.<area>``, the server's ``Client`` and None (the server decides who
    acts). A command calls ``module.fn(stores, ...)`` the same way in both."""
    st = state(ctx)
    if st.remote and area in REMOTE_AREAS:
        return importlib.import_module(f"scheduler.remote.{area}"), st.client(), None
    stores, principal = verbs_of(ctx)
    return importlib.import_module(f"scheduler.verbs.{area}"), stores, principal


def verbs_for(stores: Any, area: str) -> ModuleType:
    """The verbs of ``area`` that go with ``stores`` (a helper shared by several commands,
    given the stores a command already has)."""
    from scheduler.remote.client import Client

    package = "scheduler.remote" if isinstance(stores, Client) else "scheduler.verbs"
    return importlib.import_module(f"{package}.{area}")


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

