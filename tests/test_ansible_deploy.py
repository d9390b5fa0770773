"""The Ansible deployment stays true to the code: its config keys are real settings, its
unit files call real commands with real options, and every template variable is defined."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from scheduler.cli.app import app
from scheduler.config import load_settings

ANSIBLE = Path(__file__).resolve().parent.parent / "ansible"
VAULT_VARS = {"fleetsched_redis_url", "fleetsched_database_url"}
JINJA_VAR = re.compile(r"{{\s*([a-z_]+)")


def defaults() -> dict[str, object]:
    return yaml.safe_load((ANSIBLE / "group_vars" / "all.yml").read_text())


def render(template: str, values: dict[str, object]) -> str:
    """Enough of Jinja for these templates: plain ``{{ var }}`` substitution, applied twice
    because defaults refer to other defaults."""
    for _ in range(2):
        template = re.sub(r"{{\s*([a-z_]+)\s*}}", lambda m: str(values[m.group(1)]), template)
    return template


def test_every_yaml_file_parses() -> None:
    for path in ANSIBLE.rglob("*.yml"):
        assert yaml.safe_load(path.read_text()) is not None, path


def test_every_template_variable_is_defined_or_comes_from_the_vault() -> None:
    known = set(defaults()) | VAULT_VARS | {"item"}
    used: set[str] = set()
    for path in [ANSIBLE / "site.yml", *ANSIBLE.glob("templates/*.j2"), ANSIBLE / "group_vars/all.yml"]:
        used |= set(JINJA_VAR.findall(path.read_text()))
    assert used - known == set()


def test_the_rendered_config_file_loads_as_fleetsched_settings(tmp_path: Path) -> None:
    values = {**defaults(), "fleetsched_redis_url": "redis://:pw@10.0.0.5:6379/0",
              "fleetsched_database_url": "postgresql+psycopg://fs:pw@10.0.0.6/fleetsched"}
    config = tmp_path / "config.toml"
    config.write_text(render((ANSIBLE / "templates" / "config.toml.j2").read_text(), values))
    settings = load_settings(environ={}, config_path=config)
    assert settings.redis_url == "redis://:pw@10.0.0.5:6379/0"
    assert settings.worker_slots == defaults()["fleetsched_worker_slots"]


@pytest.mark.parametrize("unit", ["fleetsched-worker.service", "fleetsched-recorder.service"])
def test_each_unit_runs_a_real_command_with_real_options(unit: str) -> None:
    text = render((ANSIBLE / "templates" / f"{unit}.j2").read_text(), defaults())
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_start.removeprefix("ExecStart="))
    assert argv[0].endswith("/bin/fleetsched")
    command = argv[1]
    help_text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
    for flag in (a for a in argv[2:] if a.startswith("--")):
        assert flag in help_text, f"{unit}: {command} has no option {flag}"
