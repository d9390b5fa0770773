"""Running ``fleetsched`` in tests: through ``main()`` inside typer's ``CliRunner`` isolation
(the real error handling: ``error:``/``hint:`` lines and exit codes), stdout and stderr apart.

``run_cli(args, env=...)`` returns ``(exit code, stdout, stderr)``; an exception escaping
``main()`` (a traceback for the operator) is re-raised, so a test sees it as a failure.
``all_commands()`` lists every command path of the CLI (``["tasks", "watch"]`` ...).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from scheduler.cli.app import app, main

BASE_ENV = {"NO_COLOR": "1", "COLUMNS": "200", "FLEETSCHED_CONFIG": None,
            "FLEETSCHED_REDIS_URL": None, "FLEETSCHED_DATABASE_URL": None,
            "FLEETSCHED_STATE_DIR": None, "FLEETSCHED_OPERATOR": None}


def isolated_env(tmp_path: Path, **extra: str | None) -> dict[str, str | None]:
    """Config and state under ``tmp_path``: never the developer's own."""
    return {**BASE_ENV, "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_STATE_HOME": str(tmp_path / "state"), **extra}


def run_cli(args: list[str], env: Mapping[str, str | None] | None = None,
            stdin: str | None = None) -> tuple[int, str, str]:
    runner = CliRunner()
    with runner.isolation(input=stdin, env=dict(env or BASE_ENV)) as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return code, out.getvalue().decode(), err.getvalue().decode()


@functools.lru_cache(maxsize=1)
def root_command() -> Any:
    """The whole CLI as a click command, built once (typer builds it anew at every call, about
    0.1 s: asked for each of hundreds of examples, that was a fifth of a test's time)."""
    return typer.main.get_command(app)


def all_commands() -> list[list[str]]:
    """Every command and group of the CLI as argument paths, the root first."""
    out: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        out.append(path)
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(root_command(), [])
    return out


def leaf_commands() -> list[list[str]]:
    """Commands that do something (groups without a callback of their own left out)."""
    root = root_command()
    leaves = []
    for path in all_commands():
        cmd = root
        for name in path:
            cmd = cmd.commands[name]  # type: ignore[attr-defined]
        if not getattr(cmd, "commands", None) or getattr(cmd, "invoke_without_command", False):
            leaves.append(path)
    return [p for p in leaves if p]
