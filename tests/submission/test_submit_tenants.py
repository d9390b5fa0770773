"""A submitted job names its host's customer (``jobs.tenant``, copied from ``hosts.tenant`` when
the task is recorded), on SQLite and PostgreSQL, through the console script's ``main()``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.submit_support import Cli, cli_with_inventory, inventory, sql_rows
from tests.tenants_support import ACME_AND_GLOBEX

FLEET = ACME_AND_GLOBEX + "[ops]\nops-01\n"


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, database_url: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, FLEET, database_url)


def test_each_job_of_a_task_takes_its_hosts_tenant_and_keeps_it_when_the_host_moves(
        cli: Cli, tmp_path: Path) -> None:
    # When a task is submitted to every host
    task = cli.submit("command", "--target", "all", "--param", "cmd=true")
    # Then each job names its host's customer, and the team's host none
    jobs = dict(sql_rows(cli.database_url, "SELECT host, tenant FROM jobs WHERE task_id = :t",
                         t=task))
    assert jobs == {"acme-01": "acme", "acme-02": "acme", "globex-01": "globex",
                    "ops-01": None}
    # And a host that moves to another customer later does not move the jobs it already ran
    inventory(cli, tmp_path, FLEET.replace("[ops]\nops-01\n", "").replace(
        "[globex]\nglobex-01", "[globex]\nglobex-01\nops-01"))
    again = cli.submit("command", "--target", "ops-01", "--param", "cmd=true")
    rows = sql_rows(cli.database_url, "SELECT task_id, tenant FROM jobs WHERE host = 'ops-01' "
                                      "ORDER BY task_id")
    assert [tuple(r) for r in rows] == [(task, None), (again, "globex")]


def test_a_customer_sees_how_many_waves_a_task_has_never_the_term_naming_its_first(
        cli: Cli) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    from scheduler.submission.tenant_tasks import show_tenant_task

    # Given a rollout whose first wave is named by a group (another customer's)
    task = cli.submit("command", "--target", "all", "--param", "cmd=true", "--in", "1h",
                      "--waves", "group:globex,100%")
    engine = sa.create_engine(cli.database_url)
    try:
        with Session(engine) as session:
            shown = show_tenant_task(session, task, "acme")
    finally:
        engine.dispose()
    # Then acme's view says two waves, and nothing of the term that names the first
    assert shown["policy"]["waves"] == "2 waves", shown["policy"]
    assert "globex" not in repr(shown), shown
