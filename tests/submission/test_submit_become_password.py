"""A become password (issue 30) is stored only as its secret reference: submit refuses a
literal ``become_password`` executor option in one line without repeating it, and takes a
reference; an inventory import keeps ``ansible_become_pass=@env:NAME`` and skips a literal;
``hosts add --var`` likewise. The worker side: tests/executors/test_executor_ssh_become_password.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from tests.submit_support import (
    Cli,
    cli_with_inventory,
    migrated_sqlite,
    redis_snapshot,
    sql_snapshot,
)

LITERAL = "hunter2-literal"


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_sqlite(tmp_path_factory.mktemp("tpl"))


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, template_db: Path) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, "[web]\nweb-[01:02]\n", migrated=template_db)


@pytest.mark.parametrize("value", [LITERAL, "@" + LITERAL, "@env:" + LITERAL + "!", "@@x"])
def test_a_literal_become_password_option_is_refused_in_one_line_without_showing_it(
        cli: Cli, redis_client: redis.Redis, value: str) -> None:
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    got, out, err = cli("submit", "command", "-t", "web-01", "-p", "cmd=true", "--become-user",
                        "root", "--executor-option", f"become_password={value}", "--yes")
    lines = err.splitlines()
    assert got == 2 and out == "", err
    assert lines[0] == ("error: executor option become_password: a become password must be a "
                        "secret reference, not a literal value (refused; not shown)"), lines
    assert lines[1:] == [("hint: give a secret reference: @env:NAME or @file:/path, read on "
                          "the worker")]
    assert LITERAL not in err
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before


def test_a_become_password_reference_is_taken_and_stored_as_the_reference(cli: Cli) -> None:
    cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--become-user", "root",
               "--executor-option", "become_password=@env:DB01_SUDO")
    assert "@env:DB01_SUDO" in json.dumps(sql_snapshot(cli.database_url), default=str)


def test_the_inventory_keeps_a_become_password_reference_and_skips_a_literal(
        cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "inv.ini"
    path.write_text("[db]\ndb-01 ansible_become=true ansible_become_pass=@env:DB01_SUDO\n"
                    f"db-02 ansible_become_password={LITERAL}\n")
    got, _, err = cli("hosts", "import", str(path))
    assert got == 0, err
    assert "skipped 1 secret variable(s) (ansible_become_password)" in err
    rows = json.dumps(sql_snapshot(cli.database_url), default=str)
    assert "@env:DB01_SUDO" in rows and LITERAL not in rows


def test_hosts_add_takes_a_become_password_reference_and_refuses_a_literal(cli: Cli) -> None:
    cli.ok("hosts", "add", "db-03", "--var", "ansible_become_password=@file:/etc/fleetsched/db")
    assert "@file:/etc/fleetsched/db" in json.dumps(sql_snapshot(cli.database_url), default=str)
    got, _, err = cli("hosts", "add", "db-04", "--var", f"ansible_become_password={LITERAL}")
    assert got == 2 and "fleetsched does not store secrets" in err and LITERAL not in err
