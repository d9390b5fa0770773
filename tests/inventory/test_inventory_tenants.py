"""Tenants in the inventory: the group variable ``fleetsched_tenant`` makes its hosts (child
groups' included) a customer's, on SQLite and PostgreSQL; a host two tenants reach refuses the
whole file and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.inventory import import_inventory, list_hosts, show_host
from scheduler.inventory.model import InventoryError
from scheduler.record.models import Event, Host
from scheduler.record.session import transaction

INI = """\
[acme-web]
acme-web-01
acme-web-02

[acme-db]
acme-db-01

[acme:children]
acme-web
acme-db

[acme:vars]
fleetsched_tenant=acme

[globex]
globex-01

[globex:vars]
fleetsched_tenant=globex

[ops]
ops-01
"""

YAML = """\
all:
  children:
    customers:
      children:
        acme:
          vars: {fleetsched_tenant: acme}
          children:
            acme_web:
              hosts: {acme-web-01: {}}
        globex:
          vars: {fleetsched_tenant: globex}
          hosts: {globex-01: {}}
    ops:
      hosts: {ops-01: {}}
"""


def tenants(engine: Engine) -> dict[str, str | None]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(Host.name, Host.tenant)).all())


def test_an_ini_import_gives_each_host_the_tenant_of_its_groups_children_included(
        engine: Engine, tmp_path: Path) -> None:
    # Given an INI inventory whose customer groups carry fleetsched_tenant, acme through children
    path = tmp_path / "fleet.ini"
    path.write_text(INI)
    # When it is imported
    result = import_inventory(engine, path, operator="alice")
    # Then every host has its customer, the team's host none, and the summary counts them
    assert tenants(engine) == {"acme-web-01": "acme", "acme-web-02": "acme",
                               "acme-db-01": "acme", "globex-01": "globex", "ops-01": None}
    assert result.plan.tenants == {"acme": 3, "globex": 1}
    with transaction(engine) as session:
        event = session.scalars(sa.select(Event).where(Event.kind == "import")).one()
        assert event.data["tenants"] == {"acme": 3, "globex": 1}
        # And hosts list and show say it
        assert {r["name"]: r["tenant"] for r in list_hosts(session)}["acme-db-01"] == "acme"
        assert show_host(session, "globex-01")["tenant"] == "globex"


def test_a_yaml_import_inherits_the_tenant_through_nested_groups(engine: Engine,
                                                                 tmp_path: Path) -> None:
    path = tmp_path / "fleet.yml"
    path.write_text(YAML)
    import_inventory(engine, path, operator="alice")
    assert tenants(engine) == {"acme-web-01": "acme", "globex-01": "globex", "ops-01": None}


def test_a_host_reached_through_two_tenants_groups_is_refused_and_nothing_is_written(
        engine: Engine, tmp_path: Path) -> None:
    # Given a fleet already imported
    path = tmp_path / "fleet.ini"
    path.write_text(INI)
    import_inventory(engine, path, operator="alice")
    before = tenants(engine)
    # When a new version puts acme-db-01 in globex's group too (and adds a host)
    path.write_text(INI.replace("[globex]\nglobex-01", "[globex]\nglobex-01\nacme-db-01\nnew-01"))
    with pytest.raises(InventoryError) as refused:
        import_inventory(engine, path, operator="alice")
    # Then the one line names the host and both tenants, and nothing changed
    message = str(refused.value)
    assert "\n" not in message
    assert "host 'acme-db-01' is in two tenants: acme (from group 'acme') and globex " \
           "(from group 'globex')" in message
    assert tenants(engine) == before
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one() == 1


def test_moving_a_host_to_another_tenant_updates_it(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "fleet.ini"
    path.write_text(INI)
    import_inventory(engine, path, operator="alice")
    path.write_text(INI.replace("[globex]\nglobex-01", "[globex]\nglobex-01\nops-01")
                    .replace("[ops]\nops-01\n", ""))
    result = import_inventory(engine, path, operator="alice")
    assert [c.changes["tenant"] for c in result.plan.updated if c.name == "ops-01"] == [
        (None, "globex")]
    assert tenants(engine)["ops-01"] == "globex"


def test_a_tenant_that_is_not_a_name_is_refused_with_its_place(engine: Engine,
                                                               tmp_path: Path) -> None:
    path = tmp_path / "fleet.ini"
    path.write_text("[acme]\nacme-01\n\n[acme:vars]\nfleetsched_tenant='ac me'\n")
    with pytest.raises(InventoryError,
                       match=r"fleet\.ini:\d+(:\d+)?: fleetsched_tenant 'ac me' is not a name"):
        import_inventory(engine, path, operator="alice")
    assert tenants(engine) == {}


def test_the_import_command_says_how_many_hosts_each_tenant_got_and_hosts_list_shows_it(
        tmp_path: Path, redis_url: str) -> None:
    from scheduler.record.migrate import upgrade
    from tests.submit_support import Cli

    database_url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(database_url)
    cli = Cli(tmp_path, redis_url, database_url)
    path = tmp_path / "fleet.ini"
    path.write_text(INI)
    code, _out, err = cli("hosts", "import", str(path))
    assert code == 0
    assert "; tenants: acme 3 host(s), globex 1 host(s)" in err
    listed = cli.ok("hosts", "list", "--output", "csv").splitlines()
    assert listed[0].split(",")[5] == "tenant"
    assert [line.split(",")[5] for line in listed[1:]] == ["acme", "acme", "acme", "globex", ""]
    # A host in two tenants: exit 2, one line naming both, nothing imported
    path.write_text(INI.replace("[ops]\nops-01", "[ops]\nops-01\nglobex-01\n[ops:vars]\n"
                                                 "fleetsched_tenant=ops"))
    code, _out, err = cli("hosts", "import", str(path))
    assert code == 2
    assert "host 'globex-01' is in two tenants: globex (from group 'globex') and ops " \
           "(from group 'ops')" in err
    assert cli.ok("hosts", "show", "ops-01", "--output", "json").count('"tenant": null') == 1
