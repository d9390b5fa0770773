"""The root ``fleetsched`` command: global options, sub-app registration, error handling.

A command line builds only the command it names (``build``, ``_invoked``); ``app`` is the
whole CLI, for tests and the docs generator.

Exit codes (documented in the README): 0 ok, 1 failure, 2 usage or validation error,
3 partial failure, 4 not found, 5 cancelled or declined.
Every command stays thin: parse, call the library, render through ``scheduler.cli.output``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import State
from scheduler.errors import FleetschedError


def _print_version(asked: bool) -> None:
    """``--version``: the ``version`` command's output, then stop before any command runs."""
    if asked:
        version()
        raise typer.Exit()


def root(
    ctx: typer.Context,
    redis_url: Annotated[str | None, typer.Option(help="Redis URL; default: the embedded private server.", envvar=None)] = None,
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL; default: SQLite in the state directory.")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="Directory for the embedded Redis and SQLite files.")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML config file (default: $XDG_CONFIG_HOME/fleetsched/config.toml).")] = None,
    operator: Annotated[str | None, typer.Option("--as", help="Operator name recorded on changes (default: $FLEETSCHED_OPERATOR or the OS user).")] = None,
    server: Annotated[str | None, typer.Option("--server", metavar="URL", help="Remote mode: go through this `fleetsched server` with the API token of $FLEETSCHED_TOKEN or the token_file setting (default: the server setting; none: direct mode).")] = None,
    show_version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the fleetsched version and exit (as `fleetsched version`).")] = False,
) -> None:
    """fleetsched: operations jobs for a fleet of hosts."""
    ctx.obj = State(
        {"redis_url": redis_url, "database_url": database_url, "state_dir": state_dir,
         "operator": operator, "server": server},
        config,
    )


def version() -> None:
    """Print the fleetsched version."""
    from importlib.metadata import version as pkg_version

    output.stdout.print(pkg_version("fleetsched"))


# Every command but `version` lives in scheduler/cli/<name>_cmd.py: a group as `<name>_app`, a
# single command as the function `<name>` with its help examples in `EPILOG`. Listed in the
# order `--help` shows them.
GROUPS = ("actions", "config", "db", "groups", "hosts", "jobs", "notify", "reconcile", "recorder",
          "redis", "schedules", "tasks", "templates", "tenants", "tokens", "windows", "worker")
COMMANDS = ("submit", "demo", "status", "doctor", "report", "top", "exporter", "server")
GLOBAL_OPTIONS = ("--redis-url", "--database-url", "--state-dir", "--config", "--as", "--server")
"""The root callback's options; each takes a value (``_invoked`` skips it)."""


@functools.lru_cache(maxsize=None)
def build(only: str | None = None) -> typer.Typer:
    """The root app with every command registered, or with only the command ``only`` (and
    ``version``): a command line names one command, and importing the other modules and
    building their parsers would cost a ``fleetsched worker`` about a tenth of a second of
    its start-up (docs/benchmarks.md, "Worker start-up")."""
    import importlib

    from scheduler.cli import examples

    cli = typer.Typer(
        name="fleetsched",
        help="Schedule operations jobs on a fleet of hosts: Redis queue, SSH workers, SQL audit record.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    cli.callback()(root)
    cli.command()(version)
    for name in GROUPS + COMMANDS:
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"scheduler.cli.{name}_cmd")
        if name in GROUPS:
            cli.add_typer(getattr(module, f"{name}_app"), name=name)
        else:
            cli.command(name, epilog=module.EPILOG)(getattr(module, name))
    examples.apply(cli)
    return cli


def __getattr__(name: str) -> typer.Typer:
    """``app``: the whole CLI, built on first use (tests, the docs generator)."""
    if name == "app":
        return build()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _invoked(args: list[str]) -> str | None:
    """The command a command line names, if it names a known one before any help option."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in GROUPS + COMMANDS + ("version",):
            return arg
        if arg == "--version":
            return "version"
        if arg in GLOBAL_OPTIONS:
            i += 2
        elif arg.startswith(tuple(f"{o}=" for o in GLOBAL_OPTIONS)):
            i += 1
        else:
            return None  # help, an unknown option or command: the whole app answers
    return None


# `--help` in a pipe (`fleetsched submit --help | less`): rich lays it out at 80 columns there
# and cuts option names and types with an ellipsis. None of the 173 help pages is cut at 100
# columns today; 120 leaves room for the options to come.
HELP_PIPE_WIDTH = 120


def _widen_help_in_a_pipe() -> None:
    """Lay ``--help`` out at ``HELP_PIPE_WIDTH`` when stdout is no terminal and neither
    ``COLUMNS`` nor typer's ``TERMINAL_WIDTH`` says a width (typer reads the latter into
    ``rich_utils.MAX_WIDTH`` at import, which is what we set)."""
    import os

    from typer import rich_utils

    if os.environ.get("COLUMNS") or os.environ.get("TERMINAL_WIDTH") or sys.stdout.isatty():
        return
    rich_utils.MAX_WIDTH = HELP_PIPE_WIDTH


def main(args: list[str] | None = None) -> None:
    """Console-script entry point: no traceback for any error fleetsched raises on purpose.

    ``args`` defaults to ``sys.argv[1:]``; tests pass their own."""
    if args is None:
        args = sys.argv[1:]
    _widen_help_in_a_pipe()
    try:
        # In non-standalone mode click returns the code of a typer.Exit instead of raising it.
        rc = build(_invoked(args))(args=args, standalone_mode=False, prog_name="fleetsched")
    except FleetschedError as exc:
        output.error(str(exc), exc.hint)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        output.error("interrupted")
        sys.exit(130)
    except Exception as exc:  # typer's own usage errors
        code = getattr(exc, "exit_code", None)
        if type(exc).__name__ in ("UsageError", "BadParameter", "NoSuchOption", "MissingParameter"):
            show = getattr(exc, "format_message", None)
            output.error(show() if show else str(exc), "run the command with --help")
            sys.exit(2)
        if type(exc).__name__ == "Abort":
            output.error("aborted")
            sys.exit(5)
        if type(exc).__name__ == "Exit" or isinstance(code, int):
            sys.exit(code if isinstance(code, int) else 0)
        if type(exc).__module__.split(".")[0] in ("redis", "sqlalchemy", "psycopg"):
            # A driver error that no command turned into a FleetschedError: one line, and
            # never a password (SQLAlchemy quotes whole URLs in some messages).
            from scheduler.redact import redact_exception

            output.error(f"{type(exc).__name__}: {redact_exception(exc)}")
            sys.exit(1)
        raise
    if rc == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into a returned exit code 130
        output.error("interrupted")
    sys.exit(rc if isinstance(rc, int) else 0)
