"""Every command answers ``--help`` (exit 0, its usage on stdout, nothing on stderr), every
command that does something shows examples in its help, and docs/cli.md is generated from
exactly these help texts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import all_commands, leaf_commands, run_cli

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = all_commands()


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "fleetsched")
def test_every_command_answers_help(path: list[str]) -> None:
    code, out, err = run_cli([*path, "--help"])
    assert code == 0, err
    assert "Usage: fleetsched" in out
    assert err == ""


@pytest.mark.parametrize("path", leaf_commands(), ids=" ".join)
def test_every_command_that_does_something_shows_examples_in_its_help(path: list[str]) -> None:
    code, out, _ = run_cli([*path, "--help"])
    assert code == 0
    assert "Example" in out, f"fleetsched {' '.join(path)} --help has no examples (epilog)"
    assert "fleetsched " in out.split("Example", 1)[1], "the examples show no command line"


def test_docs_cli_md_is_generated_from_the_current_help_texts() -> None:
    # Given the generator's check mode, when it compares docs/cli.md with the CLI of this tree
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
                            capture_output=True, text=True, timeout=120)
    # Then nothing differs (run scripts/gen_cli_docs.py after changing a help text)
    assert result.returncode == 0, result.stderr


def test_docs_cli_md_lists_every_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    for path in COMMANDS:
        assert f"## `{' '.join(['fleetsched', *path])}`" in text


def test_an_unknown_command_is_a_usage_error_with_a_hint() -> None:
    code, out, err = run_cli(["no-such-command"])
    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert "hint:" in err
    assert "Traceback" not in err
