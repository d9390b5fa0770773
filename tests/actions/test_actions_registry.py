"""Plugins: a third-party distribution's ``fleetsched.actions`` entry point becomes an action.

The plugin here is a real distribution on ``sys.path`` (a ``.dist-info`` with METADATA and
entry_points.txt next to its module), found by ``importlib.metadata`` like any installed one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tasks
from tasks import registry
from tasks.host import Host
from tasks.executors import build_executor

PLUGIN_MODULE = '''
"""A tiny third-party action: says hello to the host."""
from tasks import BaseAction, Param, Text


class HelloAction(BaseAction):
    name = "hello"
    description = "Say hello on the host."
    idempotent = True
    expected_ms = 1_000
    params = {"greeting": Param("greeting", Text(), "what to say", default="hi")}

    def execute(self, steps, host, params, ctx):
        steps.run(["echo", params["greeting"], host.name], "hello")


class NotAnAction:
    name = "half"
'''


def make_plugin_dist(site: Path, entry_points: str) -> Path:
    """A distribution ``fs-hello-plugin 1.0`` in ``site``, with the given entry points."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "fs_hello_plugin.py").write_text(PLUGIN_MODULE)
    info = site / "fs_hello_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fs-hello-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return site


ENTRY_POINTS = """\
    [fleetsched.actions]
    hello = fs_hello_plugin:HelloAction
    """


def test_a_plugin_entry_point_registers_an_action_that_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a plugin distribution on the path
    monkeypatch.syspath_prepend(str(make_plugin_dist(tmp_path / "site", ENTRY_POINTS)))
    # When the actions are discovered
    reg = registry.load()
    # Then it is there beside the built-ins, with its origin and parameters
    assert reg.problems == []
    assert "hello" in reg.actions and "command" in reg.actions
    assert reg.origins["hello"] == "plugin fs-hello-plugin 1.0"
    hello = reg.actions["hello"]
    assert hello.validate({}) == {"greeting": "hi"}
    # and it runs like any action (here on the worker node itself)
    with build_executor("local", {}).session(Host("web-01")) as session:
        result = hello.run(session, Host("web-01"), hello.validate({"greeting": "hello"}), 10)
    assert result.ok and result.results[0].stdout_head == "hello web-01\n"


def test_a_broken_or_clashing_plugin_is_left_out_and_reported_without_hiding_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(make_plugin_dist(tmp_path / "site", """\
        [fleetsched.actions]
        hello = fs_hello_plugin:HelloAction
        missing = fs_no_such_module:Action
        command = fs_hello_plugin:HelloAction
        half = fs_hello_plugin:NotAnAction
        renamed = fs_hello_plugin:HelloAction
        """)))
    reg = registry.load()
    problems = "\n".join(reg.problems)
    assert len(reg.problems) == 4
    assert "'missing' (fs_no_such_module:Action) failed to load: ModuleNotFoundError" in problems
    assert "'command' (fs_hello_plugin:HelloAction) ignored: the name is taken by the built-in" in problems
    assert "'half' (fs_hello_plugin:NotAnAction) ignored: missing or wrong description" in problems
    assert "'renamed' (fs_hello_plugin:HelloAction) ignored: its name 'hello' must equal" in problems
    assert reg.origins["command"] == "built-in" and "hello" in reg.actions


MAIN = "from scheduler.cli.app import main; main()"


def _cli(args: list[str], site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(site), NO_COLOR="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-c", MAIN, *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_cli_lists_and_shows_a_plugin_action_with_its_parameters(tmp_path: Path) -> None:
    site = make_plugin_dist(tmp_path / "site", ENTRY_POINTS + "    broken = fs_gone:X\n")
    listed = _cli(["actions", "list", "--output", "json"], site)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert {"command", "script", "copy", "firmware", "key-rollover", "ansible", "hello"} <= set(rows)
    assert rows["hello"]["origin"] == "plugin fs-hello-plugin 1.0"
    assert rows["hello"]["params"] == [{"name": "greeting", "type": "text", "required": False,
                                        "default": "hi", "secret": False, "help": "what to say"}]
    assert "warning: plugin action 'broken' (fs_gone:X) failed to load" in listed.stderr
    shown = _cli(["actions", "show", "hello"], site)
    assert shown.returncode == 0 and "greeting" in shown.stdout and "what to say" in shown.stdout


def test_the_cli_names_an_unknown_action_and_lists_the_known_ones(tmp_path: Path) -> None:
    shown = _cli(["actions", "show", "nope"], tmp_path)
    assert shown.returncode == 4 and shown.stdout == ""
    assert shown.stderr.splitlines()[0] == "error: unknown action 'nope'"
    assert "hint: known actions: ansible, command, copy" in shown.stderr
    assert "Traceback" not in shown.stderr


def test_the_process_registry_is_loaded_once_and_reloads_on_request() -> None:
    first = registry.registry()
    assert registry.registry() is first
    assert registry.reload() is not first
    assert [a.name for a in tasks.list_actions()] == sorted(a.name for a in tasks.list_actions())
