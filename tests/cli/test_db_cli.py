"""``fleetsched db``: upgrade, current, history, downgrade through the real console entry point,
on SQLite and PostgreSQL; bad input gets one line and a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

from scheduler.record import migrate
from tests.cli.test_config import run_cli


def _env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def test_db_upgrade_then_current_reports_the_newest_revision(database_url: str,
                                                              tmp_path: Path) -> None:
    env = _env(tmp_path)
    code, _, err = run_cli(["--database-url", database_url, "db", "upgrade"], env)
    assert code == 0, err
    assert "upgraded from base to" in err
    code, out, _ = run_cli(["--database-url", database_url, "db", "current", "-o", "json"], env)
    assert code == 0
    shown = json.loads(out)
    assert shown["current"] == migrate.head() and shown["up_to_date"] is True
    # Upgrading again changes nothing and says so
    code, _, err = run_cli(["--database-url", database_url, "db", "upgrade"], env)
    assert code == 0 and "already at" in err


def test_db_history_marks_the_current_revision(tmp_path: Path) -> None:
    env = _env(tmp_path)
    url = f"sqlite:///{tmp_path / 'h.db'}"
    run_cli(["--database-url", url, "db", "upgrade"], env)
    code, out, _ = run_cli(["--database-url", url, "db", "history", "-o", "json"], env)
    rows = json.loads(out)
    assert code == 0 and rows[-1]["current"] == "*" and rows[-1]["revision"] == migrate.head()


def test_db_downgrade_needs_confirmation_and_then_drops_the_schema(tmp_path: Path) -> None:
    env = _env(tmp_path)
    url = f"sqlite:///{tmp_path / 'd.db'}"
    run_cli(["--database-url", url, "db", "upgrade"], env)
    # Without --yes and without a terminal, nothing is dropped
    code, _, err = run_cli(["--database-url", url, "db", "downgrade", "base"], env)
    assert code == 5 and "pass --yes" in err
    assert migrate.current(url) == migrate.head()
    code, _, err = run_cli(["--database-url", url, "db", "downgrade", "base", "--yes"], env)
    assert code == 0, err
    assert migrate.current(url) is None


def test_an_unknown_revision_is_one_line_and_exit_two(tmp_path: Path) -> None:
    code, out, err = run_cli(["--database-url", f"sqlite:///{tmp_path / 'x.db'}",
                              "db", "upgrade", "12345"], _env(tmp_path))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "error: unknown migration revision '12345'"
    assert "Traceback" not in err


def test_an_unreachable_database_is_reported_without_its_password(tmp_path: Path) -> None:
    url = "postgresql+psycopg://fleet:s3cret-pw@127.0.0.1:1/nothing"
    code, _, err = run_cli(["--database-url", url, "db", "current"], _env(tmp_path))
    assert code == 1
    assert "cannot reach the database" in err and "s3cret-pw" not in err
    assert "Traceback" not in err
