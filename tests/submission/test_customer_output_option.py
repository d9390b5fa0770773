"""``--customer-output`` (``customer_output`` in a task file): recorded on the task and in its
submit event, off unless asked for, through the console script's ``main()`` on SQLite and
PostgreSQL; a task file's value must be true or false."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.submit_support import Cli, cli_with_inventory, sql_rows

FLEET = "[acme]\nacme-01\n[acme:vars]\nfleetsched_tenant=acme\n"


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, database_url: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, FLEET, database_url)


def _recorded(cli: Cli, task: int) -> tuple[bool, bool]:
    [(column,)] = sql_rows(cli.database_url, "SELECT customer_output FROM tasks WHERE id = :t",
                           t=task)
    [(data,)] = sql_rows(cli.database_url, "SELECT data FROM events WHERE task_id = :t AND "
                                           "kind = 'submit'", t=str(task))
    data = data if isinstance(data, dict) else json.loads(data)
    return bool(column), data["customer_output"]


def test_customer_output_is_recorded_only_where_the_operator_asks_for_it(
        cli: Cli, tmp_path: Path) -> None:
    plain = cli.submit("command", "-t", "acme-01", "-p", "cmd=true", "--in", "1h")
    flagged = cli.submit("command", "-t", "acme-01", "-p", "cmd=true", "--in", "1h",
                         "--customer-output")
    (tmp_path / "task.yaml").write_text("action: command\ntarget: acme-01\n"
                                        "params: {cmd: 'true'}\nin: 1h\ncustomer_output: true\n")
    filed = cli.submit("-f", str(tmp_path / "task.yaml"))
    assert [_recorded(cli, t) for t in (plain, flagged, filed)] == [
        (False, False), (True, True), (True, True)]
    # A task file's value is true or false, one line naming its line
    (tmp_path / "bad.yaml").write_text("action: command\ntarget: acme-01\n"
                                       "customer_output: sometimes\n")
    code, _out, err = cli("submit", "-f", str(tmp_path / "bad.yaml"), "--yes")
    assert code == 2 and "bad.yaml:3" in err and "customer_output must be true or false" in err
