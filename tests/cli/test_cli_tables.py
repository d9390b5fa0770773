"""Tables read in a pipe and in CI logs: when stdout is not a terminal, every value is printed
whole on its row's one line, with no ellipsis and no box characters, whatever ``COLUMNS`` says.
``run_cli`` captures stdout, so it is never a terminal here."""

from __future__ import annotations

from pathlib import Path

from tests.cli_support import isolated_env, run_cli

LONG_NAME = "web-" + "0123456789abcdef" * 7 + "end"  # 119 characters


def test_a_long_value_appears_whole_on_one_line_of_a_listing(tmp_path: Path) -> None:
    # Given a host whose name is far wider than an 80-column terminal
    env = isolated_env(tmp_path, COLUMNS="80")
    code, _, err = run_cli(["hosts", "add", LONG_NAME, "--address", "10.0.0.1",
                            "--group", "web"], env)
    assert code == 0, err
    # When the hosts are listed into a pipe
    code, out, err = run_cli(["hosts", "list"], env)
    # Then its row holds the whole name and the columns after it, on one line, unboxed
    assert code == 0, err
    rows = [line for line in out.splitlines() if LONG_NAME in line]
    assert len(rows) == 1
    assert rows[0].split() == [LONG_NAME, "10.0.0.1", "22", "web", "cli"]
    assert out.splitlines()[0].split()[:2] == ["name", "address"]
    assert "…" not in out and "─" not in out and "│" not in out


def test_a_long_message_of_a_status_table_is_not_cut(tmp_path: Path) -> None:
    # Given a database path far wider than the terminal, in the message of the database check
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    url = f"sqlite:///{deep / 'record.db'}"
    env = isolated_env(tmp_path, COLUMNS="80", FLEETSCHED_DATABASE_URL=url)
    assert run_cli(["db", "upgrade"], env)[0] == 0
    # When status prints its table (a rich table) into a pipe
    _, out, _ = run_cli(["status"], env)
    # Then the database line holds the whole URL
    line = next(line for line in out.splitlines() if " database " in f" {line} ")
    assert url in line
    assert "…" not in out
