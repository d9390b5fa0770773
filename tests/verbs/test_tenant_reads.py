"""The tenant-scoped reads of scheduler.verbs on SQLite and PostgreSQL: the conditions of
scheduler.record.tenancy (a recursive query up the group tree, correlated counts, a state
filter over a customer's own jobs) run on both, and give a customer its own rows only."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.config import load_settings
from scheduler.errors import NotFoundError
from scheduler.record.migrate import upgrade
from scheduler.verbs import inventory, status, tasks, windows
from scheduler.verbs.stores import Stores
from tests.submit_support import Cli
from tests.tenants_support import ACME_AND_GLOBEX

FLEET = ACME_AND_GLOBEX + "[customers:children]\nacme\nglobex\n[web]\nweb-01\n"


@pytest.fixture
def stores(tmp_path: Path, redis_url: str, database_url: str) -> Stores:
    upgrade(database_url)
    (tmp_path / "config.toml").write_text("")
    settings = load_settings({"redis_url": redis_url, "database_url": database_url,
                              "state_dir": tmp_path / "state"},
                             environ={}, config_path=tmp_path / "config.toml")
    return Stores(settings)


def test_a_customer_reads_its_own_tasks_hosts_windows_and_counts(stores: Stores,
                                                                 tmp_path: Path) -> None:
    # Given acme's, globex's and the team's hosts, a task over all of them and one of acme's
    cli = Cli(tmp_path, stores.settings.redis_url, stores.settings.database_url)
    (tmp_path / "fleet.ini").write_text(FLEET)
    cli.ok("hosts", "import", str(tmp_path / "fleet.ini"))
    every = cli.submit("command", "--target", "all", "--param", "cmd=true", "--in", "1h")
    own = cli.submit("command", "--target", "acme-02", "--param", "cmd=true", "--in", "1h")
    cli.submit("command", "--target", "globex-01", "--param", "cmd=true", "--in", "1h")
    cli.ok("windows", "add", "w-parent", "--cron", "0 2 * * *", "--duration", "1h")
    cli.ok("windows", "assign", "w-parent", "--group", "customers")
    cli.ok("windows", "add", "w-globex", "--cron", "0 2 * * *", "--duration", "1h")
    cli.ok("windows", "assign", "w-globex", "--group", "globex")
    # Then acme's task list holds the two tasks with one of its jobs, counted over them
    listed = {t["id"]: t["total"] for t in tasks.list_(stores, tenant="acme")}
    assert listed == {every: 2, own: 1}
    assert [t["id"] for t in tasks.list_(stores, tenant="acme", state="active", limit=1,
                                         offset=1)] == [every]
    assert tasks.list_(stores, tenant="acme", state="succeeded") == []
    shown = tasks.show(stores, every, tenant="acme")
    assert (shown["total"], shown["jobs"], shown["target"]) == (2, {"pending": 2}, None)
    assert [j["host"] for j in tasks.jobs(stores, every, tenant="acme")] == [
        "acme-01", "acme-02"]
    with pytest.raises(NotFoundError, match=f"no task {own + 1}"):
        tasks.show(stores, own + 1, tenant="acme")  # globex's task: as if it did not exist
    # Its hosts, a window over a parent group of its group, its counts
    assert [h["name"] for h in inventory.list_hosts(stores, tenant="acme")] == [
        "acme-01", "acme-02"]
    with pytest.raises(NotFoundError, match="no host named 'globex-01'"):
        inventory.show_host(stores, "globex-01", tenant="acme")
    assert [(w["name"], w["assigned"]) for w in windows.list_(stores, tenant="acme")] == [
        ("w-parent", "group:customers")]
    with pytest.raises(NotFoundError, match="no window named 'w-globex'"):
        windows.show(stores, "w-globex", tenant="acme")
    assert status.tenant_status(stores, "acme") == {
        "tenant": "acme", "hosts": 2, "tasks": 2, "active_tasks": 2, "jobs": {"pending": 3}}
    # While the team's reads are whole
    assert {t["id"]: t["total"] for t in tasks.list_(stores)}[every] == 4
