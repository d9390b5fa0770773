"""The Ansible deployment stays true to the code: its config keys are real settings, its
unit files call real commands with real options, and every template variable is defined.

The templates are rendered with Jinja2 and the role's defaults, without running Ansible
(tests/deploy/test_ansible_roles.py runs it)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import jinja2
import pytest
import yaml
from typer.testing import CliRunner

from scheduler.cli.app import app
from scheduler.config import load_settings

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"
ROLES = ANSIBLE / "roles"
VAULT_VARS = {"fleetsched_redis_url", "fleetsched_database_url", "fleetsched_redis_password"}
# Set by Ansible itself, or registered by a task.
ANSIBLE_VARS = {"item", "ansible_managed", "fleetsched_upgrade", "inventory_hostname"}
JINJA_VAR = re.compile(r"{{\s*([a-z_]+)")


def help_of(*command: str) -> str:
    return CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).output


def has_command(name: str) -> bool:
    return CliRunner().invoke(app, [name, "--help"]).exit_code == 0


def role_defaults(role: str = "fleetsched") -> dict[str, object]:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


def environment(role: str) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROLES / role / "templates"),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    return env


def values(extra: dict[str, object] | None = None, role: str = "fleetsched"
           ) -> dict[str, object]:
    """The role's defaults with the references between them resolved, as Ansible would."""
    out: dict[str, object] = {**role_defaults(role), "ansible_managed": "Ansible managed",
                              "inventory_hostname": "node-1.example.org", **(extra or {})}
    env = environment(role)
    for _ in range(5):
        out = {k: env.from_string(v).render(out) if isinstance(v, str) else v
               for k, v in out.items()}
    return out


def render(template: str, extra: dict[str, object] | None = None) -> str:
    return environment("fleetsched").get_template(template).render(values(extra))


def test_every_yaml_file_parses() -> None:
    for path in [*ANSIBLE.rglob("*.yml"), ANSIBLE / ".ansible-lint"]:
        assert yaml.safe_load(path.read_text()) is not None, path


def test_every_template_variable_is_defined_or_comes_from_the_vault() -> None:
    known = (set(role_defaults()) | set(role_defaults("fleetsched_redis")) | VAULT_VARS
             | ANSIBLE_VARS)
    used: set[str] = set()
    for path in [ANSIBLE / "site.yml", *ROLES.rglob("*.yml"), *ROLES.rglob("*.j2")]:
        used |= set(JINJA_VAR.findall(path.read_text()))
    assert used - known == set()


def test_the_rendered_config_file_loads_as_fleetsched_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(render("config.toml.j2", {
        "fleetsched_redis_url": 'redis://:p"w\\@10.0.0.5:6379/0',
        "fleetsched_database_url": "postgresql+psycopg://fs:pw@10.0.0.6/fleetsched"}))
    settings = load_settings(environ={}, config_path=config)
    assert settings.redis_url == 'redis://:p"w\\@10.0.0.5:6379/0'
    assert settings.worker_slots == role_defaults()["fleetsched_worker_slots"]
    assert str(settings.state_dir) == "/var/lib/fleetsched/state"


@pytest.mark.parametrize("unit", ["fleetsched-worker.service", "fleetsched-recorder.service",
                                  "fleetsched-exporter.service"])
def test_each_unit_runs_a_real_command_with_real_options(unit: str) -> None:
    text = render(f"{unit}.j2")
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_start.removeprefix("ExecStart="))
    assert argv[0] == "/opt/fleetsched/bin/fleetsched"
    command = argv[1]
    assert has_command(command), f"{unit}: fleetsched has no command {command!r}"
    help_text = help_of(command)
    for flag in (a for a in argv[2:] if a.startswith("--")):
        assert flag in help_text, f"{unit}: {command} has no option {flag}"
