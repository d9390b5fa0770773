"""``fleetsched hosts export``: the stored inventory as an Ansible inventory, in each format.

Two proofs per format: ``hosts import`` of the exported file into an empty database gives the
same hosts and groups (a round trip), and a real ``ansible-inventory --list`` reads the
exported file to the same hosts, groups and vars as it reads the source inventory (less the
secret variable, which fleetsched never stores).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler.inventory import list_groups, list_hosts
from scheduler.inventory.validate import is_secret_var
from scheduler.record.engine import make_engine
from scheduler.record.migrate import upgrade
from scheduler.record.session import transaction
from tests.cli_support import isolated_env, run_cli
from tests.servers import missing

SECRET = "hunter2-not-exported"
# Every kind of value and membership an export must carry: an ungrouped host, nested groups,
# a host in two groups, an empty group, values INI would misread if written bare, a user and
# a port set by a group (and a host overriding that port with the default), a secret.
SOURCE = f"""\
lonely ansible_host=192.0.2.9

[web]
web-01 ansible_host=192.0.2.1 ansible_port=2222 role=front weights="[1, 2]" note="two words"
web-02 ansible_host=192.0.2.2 flag=True literal="'True'" empty="" quote="it's \\"so\\""

[db]
db-01 ansible_host=192.0.2.3
web-02

[db:vars]
ansible_user=deploy
ansible_port=2200
retention={{'days': 30, 'tiers': ['hot', 'cold']}}

[legacy]
legacy-01 ansible_port=22

[legacy:vars]
ansible_port=2201

[prod:children]
web
db

[prod:vars]
env=prod
db_password={SECRET}

[spare]
"""
FORMATS = {"ansible-json": "json", "ini": "ini", "yaml": "yml"}


def database(path: Path) -> str:
    url = f"sqlite:///{path}"
    upgrade(url)
    return url


def cli(tmp_path: Path, url: str, *args: str) -> tuple[int, str, str]:
    return run_cli(["--database-url", url, "--as", "tester", *args], env=isolated_env(tmp_path))


def stored(url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Hosts and groups as the database holds them, without where they came from or when."""
    engine = make_engine(url)
    try:
        with transaction(engine, commit=False) as session:
            hosts = [{k: v for k, v in h.items() if k not in ("source", "created_at",
                                                               "updated_at")}
                     for h in list_hosts(session)]
            groups = [{k: v for k, v in g.items() if k != "source"} for g in list_groups(session)]
    finally:
        engine.dispose()
    return hosts, groups


@pytest.fixture
def fleet(tmp_path: Path) -> str:
    """A database holding SOURCE, imported."""
    source = tmp_path / "source.ini"
    source.write_text(SOURCE)
    url = database(tmp_path / "fleet.db")
    code, _out, err = cli(tmp_path, url, "hosts", "import", str(source))
    assert code == 0, err
    return url


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_exported_inventory_imports_back_to_the_same_hosts_and_groups(
        tmp_path: Path, fleet: str, fmt: str) -> None:
    # Given the fleet exported to stdout in one format
    code, text, err = cli(tmp_path, fleet, "hosts", "export", "--format", fmt)
    assert code == 0, err
    assert "exported 5 host(s), 5 group(s)" in err
    assert SECRET not in text and "db_password" not in text
    # When that file is imported into an empty database
    exported = tmp_path / f"exported.{FORMATS[fmt]}"
    exported.write_text(text)
    copy = database(tmp_path / "copy.db")
    code, _out, err = cli(tmp_path, copy, "hosts", "import", str(exported))
    assert code == 0, err
    # Then it holds the same hosts, groups, memberships and vars
    assert stored(copy) == stored(fleet)
    hosts = {h["name"]: h for h in stored(copy)[0]}
    assert (hosts["legacy-01"]["port"], hosts["db-01"]["port"], hosts["db-01"]["user"]) == (
        22, 2200, "deploy")
    assert hosts["web-02"]["vars"]["quote"] == 'it\'s "so"'


def ansible_view(inventory: Path, home: Path) -> dict[str, Any]:
    """What ``ansible-inventory --list`` reads from ``inventory``: hostvars without secrets,
    each group's direct hosts and child groups."""
    binary = Path(sys.executable).parent / "ansible-inventory"
    if not binary.exists():
        missing("ansible-inventory", "install the dev extras: pip install -e '.[dev]'")
    import subprocess

    env = {**os.environ, "ANSIBLE_HOME": str(home), "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
           "PATH": f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run([str(binary), "-i", str(inventory), "--list"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert run.returncode == 0 and "WARNING" not in run.stderr.replace(
        "Invalid characters were found in group names", ""), run.stderr
    data = json.loads(run.stdout)
    hostvars = {h: {k: v for k, v in hv.items() if not is_secret_var(k)}
                for h, hv in data.pop("_meta")["hostvars"].items()}
    groups = {g: {"hosts": sorted(b.get("hosts", [])), "children": sorted(b.get("children", []))}
              for g, b in data.items()}
    return {"hostvars": hostvars, "groups": groups}


@pytest.mark.parametrize("fmt", FORMATS)
def test_ansible_reads_an_export_to_the_same_hosts_groups_and_vars_as_the_source(
        tmp_path: Path, fleet: str, fmt: str) -> None:
    # Given the fleet exported to a file
    out = tmp_path / f"fleet.{FORMATS[fmt]}"
    code, text, err = cli(tmp_path, fleet, "hosts", "export", "-f", fmt, "--out", str(out))
    assert code == 0 and text == "", err
    inventory = out
    if fmt == "ansible-json":  # the shape an inventory script prints: Ansible runs one
        inventory = tmp_path / "fleet-script"
        inventory.write_text(f"#!/bin/sh\ncat '{out}'\n")
        inventory.chmod(0o755)
    source = tmp_path / "source.ini"
    source.write_text(SOURCE)
    # Then Ansible reads it as it reads the source, less the secret
    assert ansible_view(inventory, tmp_path / "ah") == ansible_view(source, tmp_path / "ah")


def test_a_target_exports_its_hosts_and_the_groups_that_hold_them(tmp_path: Path,
                                                                  fleet: str) -> None:
    code, text, err = cli(tmp_path, fleet, "hosts", "export", "-f", "ansible-json",
                          "group:web,!web-01")
    assert code == 0, err
    data = json.loads(text)
    assert sorted(data["_meta"]["hostvars"]) == ["web-02"]
    assert {g: b.get("hosts", []) for g, b in data.items() if g not in ("_meta", "all")} == {
        "ungrouped": [], "web": ["web-02"], "db": ["web-02"], "prod": []}
    assert sorted(data["prod"]["children"]) == ["db", "web"]


@pytest.mark.parametrize("args, code, message", [
    (["--format", "toml"], 2, "error: --format 'toml' is not one of ansible-json, ini, yaml"),
    (["group:nope"], 4, "error: target term 'group:nope': no group named 'nope'"),
    (["--out", "/nonexistent/dir/fleet.ini"], 2, "error: --out /nonexistent/dir/fleet.ini: "
                                                "cannot write: No such file or directory"),
])
def test_bad_export_input_is_one_line_and_an_exit_code(tmp_path: Path, fleet: str,
                                                       args: list[str], code: int,
                                                       message: str) -> None:
    got, out, err = cli(tmp_path, fleet, "hosts", "export", *args)
    assert (got, out) == (code, "")
    assert err.splitlines()[0] == message
    assert "Traceback" not in err


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_secrets_a_record_holds_inside_values_are_never_exported(
        tmp_path: Path, fleet: str, fmt: str) -> None:
    import sqlalchemy as sa
    # Given a record an older version wrote, with secrets nested in a host's vars and values
    engine = make_engine(fleet)
    with engine.begin() as conn:
        name = conn.execute(sa.text("SELECT name FROM hosts ORDER BY name LIMIT 1")).scalar_one()
        conn.execute(sa.text("UPDATE hosts SET vars = :v WHERE name = :n"), {"n": name, "v": json.dumps(
            {"db": {"user": "app", "password": "NestedHunter2"},
             "conn": "postgresql://app:UrlHunter2@db/app",
             "key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----"})})
    engine.dispose()
    # When it is exported
    code, out, err = cli(tmp_path, fleet, "hosts", "export", "--format", fmt)
    # Then no secret is in it, and what is not secret is
    assert code == 0, err
    assert "Hunter2" not in out and "b3Blbn" not in out
    assert "postgresql://app:***@db/app" in out and "app" in out
