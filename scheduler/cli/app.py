"""The root ``fleetsched`` command: global options, sub-app registration, error handling.

Exit codes (documented in the README): 0 ok, 1 failure, 2 usage or validation error,
3 partial failure, 4 not found, 5 cancelled or declined.
Every command stays thin: parse, call the library, render through ``scheduler.cli.output``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import State
from scheduler.errors import FleetschedError

app = typer.Typer(
    name="fleetsched",
    help="Schedule operations jobs on a fleet of hosts: Redis queue, SSH workers, SQL audit record.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)




@app.callback()
def root(
    ctx: typer.Context,
    redis_url: Annotated[str | None, typer.Option(help="Redis URL; default: the embedded private server.", envvar=None)] = None,
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL; default: SQLite in the state directory.")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="Directory for the embedded Redis and SQLite files.")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML config file (default: $XDG_CONFIG_HOME/fleetsched/config.toml).")] = None,
    operator: Annotated[str | None, typer.Option("--as", help="Operator name recorded on changes (default: $FLEETSCHED_OPERATOR or the OS user).")] = None,
) -> None:
    """fleetsched: operations jobs for a fleet of hosts."""
    ctx.obj = State(
        {"redis_url": redis_url, "database_url": database_url, "state_dir": state_dir,
         "operator": operator},
        config,
    )


def main(args: list[str] | None = None) -> None:
    """Console-script entry point: no traceback for any error fleetsched raises on purpose.

    ``args`` defaults to ``sys.argv[1:]``; tests pass their own."""
    try:
        # In non-standalone mode click returns the code of a typer.Exit instead of raising it.
        rc = app(args=args, standalone_mode=False, prog_name="fleetsched")
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
            from scheduler.config import redact_exception

            output.error(f"{type(exc).__name__}: {redact_exception(exc)}")
            sys.exit(1)
        raise
    if rc == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into a returned exit code 130
        output.error("interrupted")
    sys.exit(rc if isinstance(rc, int) else 0)


@app.command()
def version() -> None:
    """Print the fleetsched version."""
    from importlib.metadata import version as pkg_version

    output.stdout.print(pkg_version("fleetsched"))


# Sub-apps, one per noun; each imports the shared state from scheduler.cli.context.
from scheduler.cli.actions_cmd import actions_app  # noqa: E402
from scheduler.cli.config_cmd import config_app  # noqa: E402
from scheduler.cli.db_cmd import db_app  # noqa: E402
from scheduler.cli.groups_cmd import groups_app  # noqa: E402
from scheduler.cli.hosts_cmd import hosts_app  # noqa: E402
from scheduler.cli.jobs_cmd import jobs_app  # noqa: E402
from scheduler.cli.notify_cmd import notify_app  # noqa: E402
from scheduler.cli.reconcile_cmd import reconcile_app  # noqa: E402
from scheduler.cli.recorder_cmd import recorder_app  # noqa: E402
from scheduler.cli.redis_cmd import redis_app  # noqa: E402
from scheduler.cli.schedules_cmd import schedules_app  # noqa: E402
from scheduler.cli.tasks_cmd import tasks_app  # noqa: E402
from scheduler.cli.windows_cmd import windows_app  # noqa: E402
from scheduler.cli.worker_cmd import worker_app  # noqa: E402

app.add_typer(actions_app, name="actions")
app.add_typer(config_app, name="config")
app.add_typer(db_app, name="db")
app.add_typer(groups_app, name="groups")
app.add_typer(hosts_app, name="hosts")
app.add_typer(jobs_app, name="jobs")
app.add_typer(notify_app, name="notify")
app.add_typer(reconcile_app, name="reconcile")
app.add_typer(recorder_app, name="recorder")
app.add_typer(redis_app, name="redis")
app.add_typer(schedules_app, name="schedules")
app.add_typer(tasks_app, name="tasks")
app.add_typer(windows_app, name="windows")
app.add_typer(worker_app, name="worker")

from scheduler.cli import submit_cmd  # noqa: E402

app.command("submit", epilog=submit_cmd.EPILOG)(submit_cmd.submit)

# Operator views, one command each (scheduler/cli/<name>_cmd.py; help examples in the epilog).
from scheduler.cli import (  # noqa: E402
    demo_cmd,
    doctor_cmd,
    exporter_cmd,
    report_cmd,
    status_cmd,
    top_cmd,
)

app.command("demo", epilog=demo_cmd.EPILOG)(demo_cmd.demo)
app.command("status", epilog=status_cmd.EPILOG)(status_cmd.status)
app.command("doctor", epilog=doctor_cmd.EPILOG)(doctor_cmd.doctor)
app.command("report", epilog=report_cmd.EPILOG)(report_cmd.report)
app.command("top", epilog=top_cmd.EPILOG)(top_cmd.top)
app.command("exporter", epilog=exporter_cmd.EPILOG)(exporter_cmd.exporter)

# Examples in --help for the commands registered without an epilog (scheduler/cli/examples.py).
from scheduler.cli import examples  # noqa: E402

examples.apply(app)
