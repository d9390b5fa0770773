"""The installed ``fleetsched`` console script as an operator runs it, in a subprocess: exit
codes, stdout/stderr separation, ``NO_COLOR``, one-line errors without a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BINARY = Path(sys.executable).with_name("fleetsched")
ANSI = re.compile(r"\x1b\[")


def run(tmp_path: Path, *args: str, color: bool = False, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update({"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path / "state"),
                "COLUMNS": "120"})
    env.pop("NO_COLOR", None)
    if not color:
        env["NO_COLOR"] = "1"
    else:
        env["FORCE_COLOR"] = "1"
    env.update(extra)
    return subprocess.run([str(BINARY), *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_console_script_is_installed_and_prints_its_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    assert BINARY.exists()
    result = run(tmp_path, "version")
    assert result.returncode == 0
    assert result.stdout.strip() == version("fleetsched")
    assert result.stderr == ""


def test_the_version_option_prints_what_the_version_command_prints(tmp_path: Path) -> None:
    command = run(tmp_path, "version")
    option = run(tmp_path, "--version")
    assert option.returncode == 0, option.stderr
    assert option.stdout == command.stdout
    assert option.stderr == ""


def test_help_lists_the_operator_commands(tmp_path: Path) -> None:
    result = run(tmp_path, "--help")
    assert result.returncode == 0
    for command in ("demo", "status", "doctor", "top", "report", "submit", "tasks", "hosts"):
        assert command in result.stdout


def test_no_color_is_honoured_and_colour_is_used_otherwise(tmp_path: Path) -> None:
    plain = run(tmp_path, "doctor", "--output", "table")
    assert not ANSI.search(plain.stdout + plain.stderr)
    coloured = run(tmp_path, "doctor", "--output", "table", color=True)
    assert ANSI.search(coloured.stdout)


def test_data_goes_to_stdout_and_messages_to_stderr(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    (tmp_path / "r.db").touch()  # a database without a schema
    result = run(tmp_path, "--database-url", db, "report", "--output", "json")
    assert result.returncode == 1 and "fleetsched db upgrade" in result.stderr
    assert result.stdout == ""
    assert run(tmp_path, "--database-url", db, "db", "upgrade").returncode == 0
    result = run(tmp_path, "--database-url", db, "report", "--output", "json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["totals"] == {"jobs": 0}
    html = tmp_path / "r.html"
    result = run(tmp_path, "--database-url", db, "report", "--html", str(html))
    assert result.returncode == 0 and result.stdout == "" and "wrote" in result.stderr
    assert html.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("args, code", [
    (("no-such-command",), 2),
    (("report", "--since", "whenever"), 2),
    (("report", "--bogus-option"), 2),
    (("top", "--interval", "0"), 2),
    (("--redis-url", "redis://127.0.0.1:1/0", "top", "--once"), 1),
    (("--redis-url", "redis://:s3cret-pw@127.0.0.1:1/0", "tasks", "watch", "1"), 1),
    (("--database-url", "oracle://x", "report"), 2),
    (("hosts", "import", "/nonexistent/inventory.ini"), 2),
    (("tasks", "show", "not-a-number"), 2),
])
def test_every_error_is_one_line_with_a_hint_and_a_documented_exit_code(tmp_path: Path, args, code) -> None:
    result = run(tmp_path, *args)
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    lines = result.stderr.strip().splitlines()
    assert len(lines) <= 2 and all(ln.startswith(("error: ", "hint: ")) for ln in lines), lines
    assert "s3cret-pw" not in result.stderr + result.stdout
    assert result.stdout == ""


def test_status_exit_code_follows_health(tmp_path: Path, redis_url: str) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert run(tmp_path, "--database-url", db, "db", "upgrade").returncode == 0
    ok = run(tmp_path, "--redis-url", redis_url, "--database-url", db, "status")
    assert ok.returncode == 0, ok.stdout
    bad = run(tmp_path, "--redis-url", "redis://127.0.0.1:1/0", "--database-url", db, "status")
    assert bad.returncode == 1 and "FAIL" in bad.stdout


def test_shell_completion_can_be_shown(tmp_path: Path) -> None:
    result = run(tmp_path, "--show-completion", "bash", SHELL="/bin/bash")
    assert result.returncode == 0
    assert "fleetsched" in result.stdout and "complete" in result.stdout


def test_help_and_top_in_a_pipe_are_not_cut_at_80_columns(tmp_path: Path, redis_url: str) -> None:
    # Given no COLUMNS (a pipe, as `fleetsched submit --help | less` or a script sees it)
    piped = {"COLUMNS": "", "TERMINAL_WIDTH": ""}
    # Then no option name, type or value of any --help is cut with an ellipsis
    for args in (["--help"], ["submit", "--help"], ["tasks", "--help"]):
        result = run(tmp_path, *args, **piped)
        assert result.returncode == 0 and "…" not in result.stdout, (args, result.stdout)
    # And top --once lays its task table out at its natural width
    db = f"sqlite:///{tmp_path / 'r.db'}"
    common = ["--redis-url", redis_url, "--database-url", db]
    assert run(tmp_path, *common, "db", "upgrade").returncode == 0
    (tmp_path / "hosts.ini").write_text("[web]\nweb-01\n")
    assert run(tmp_path, *common, "hosts", "import", str(tmp_path / "hosts.ini")).returncode == 0
    assert run(tmp_path, *common, "submit", "command", "-t", "all", "-p", "cmd=true",
               "--in", "1h", "--yes").returncode == 0
    top = run(tmp_path, *common, "top", "--once", **piped)
    assert top.returncode == 0 and "…" not in top.stdout, top.stdout
    assert "failed" in top.stdout and "running" in top.stdout and "waiting" in top.stdout
