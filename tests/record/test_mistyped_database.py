"""A ``database_url`` naming a SQLite file that does not exist is refused in one line, and
nothing is created (no file, no directory): a mistyped path must not become a new, empty record
that a command then reads as "no tasks". ``db upgrade`` creates it; the default database (no
``database_url``) is still made on first use. A real Redis; the CLI through ``main()``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_config import run_cli


@pytest.mark.parametrize("command", [["tasks", "list"], ["hosts", "list"], ["report"],
                                     ["recorder", "--drain"], ["db", "prune", "--older-than",
                                                                "30d"]])
def test_a_mistyped_sqlite_path_is_refused_and_nothing_is_created(
        tmp_path: Path, redis_url: str, command: list[str]) -> None:
    typo = tmp_path / "vra" / "lib" / "fleetsched.db"
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    args = ["--database-url", f"sqlite:///{typo}", "--redis-url", redis_url]
    code, out, err = run_cli([*args, *command], env)
    assert (code, out) == (2, ""), (code, out, err)
    assert err.splitlines()[0] == f"error: no SQLite database at {typo} (is database_url mistyped?)"
    assert "Traceback" not in err and not (tmp_path / "vra").exists()
    # When the operator means it, db upgrade creates it, and the command then runs
    assert run_cli([*args, "db", "upgrade"], env)[0] == 0 and typo.exists()
    code, _out, err = run_cli([*args, *command], env)
    assert code == 0, err


def test_the_default_database_is_still_made_on_first_use(tmp_path: Path, redis_url: str) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "FLEETSCHED_DATABASE_URL": None}
    code, _out, err = run_cli(["--redis-url", redis_url, "tasks", "list"], env)
    assert code == 0, err
    assert list((tmp_path / "state").rglob("*.db")), "the default database was not created"
