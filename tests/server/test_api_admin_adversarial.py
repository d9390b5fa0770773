"""Adversarial checks of the administrative routes (``/api/v1/hosts``, ``/api/v1/tokens``)
against a real ``fleetsched server``: what an inventory change sent through the API may do to
the promises the customers' tenancy makes.

A customer's freeze may cover only its own hosts (``scheduler.windows.customer_freezes``:
"or a freeze would stop another customer's work"). That is checked when the freeze is
declared; a later import that adds another customer's host to the frozen group must not
extend the freeze to it, nor show that customer the other's freeze (its name carries the
other customer's name)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.record.types import utcnow
from scheduler.windows.freezes import host_freezes
from tests.server.conftest import Api
from tests.tenants_support import ACME_AND_GLOBEX


def _frozen(database_url: str) -> dict[str, str]:
    engine = sa.create_engine(database_url)
    try:
        with Session(engine) as session:
            return host_freezes(session, utcnow())
    finally:
        engine.dispose()


def test_an_import_through_the_api_does_not_extend_a_customers_freeze_to_another(
        api: Api, tmp_path: Path) -> None:
    # Given acme's and globex's hosts, and a group of the team's holding only acme's acme-01
    (tmp_path / "customers.ini").write_text(ACME_AND_GLOBEX + "[db]\nacme-01\n")
    api.cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    admin = api.token("cmdb-sync", "--role", "admin")
    acme = api.token("acme-cab", "--role", "customer-approver", "--tenant", "acme")
    globex = api.token("globex-dash", "--role", "customer-viewer", "--tenant", "globex")
    # And acme's freeze over that group, allowed: the group holds acme's hosts only
    made = api("POST", "/windows/freezes", acme, json={
        "name": "year-end", "start": "2030-12-20T00:00", "end": "2031-01-04T00:00",
        "tz": "Europe/Berlin", "groups": ["db"]})
    assert made.status_code == 201, made.text
    assert _frozen(api.database_url)["globex-01"] == ""
    # When an administrator's import through the API puts globex's globex-01 in that group
    imported = api("POST", "/hosts/import", admin, json={
        "name": "cmdb.ini", "inventory": ACME_AND_GLOBEX + "[db]\nacme-01\nglobex-01\n"})
    # Then either the import is refused, or acme's freeze stops none of globex's work and
    # globex is not shown it (its name names acme)
    if imported.status_code == 200:
        assert "acme:year-end" not in _frozen(api.database_url)["globex-01"]
        listed = api("GET", "/windows", globex).json()["items"]
        assert "acme:year-end" not in [w["name"] for w in listed]
        assert api("GET", "/windows/acme:year-end", globex).status_code == 404
    else:
        assert imported.status_code in (400, 409), imported.text
        assert _frozen(api.database_url)["globex-01"] == ""



def test_a_team_freeze_whose_name_holds_a_colon_still_holds_every_customers_hosts(
        api: Api, tmp_path: Path) -> None:
    # Given the two customers' hosts in one team group, and a team freeze named "q4:close"
    # ("q4" names no customer, so the name is the team's, not a customer's own freeze)
    (tmp_path / "customers.ini").write_text(ACME_AND_GLOBEX + "[db]\nacme-01\nglobex-01\n")
    api.cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    api.cli.ok("windows", "freeze", "q4:close", "--start", "2030-12-20T00:00", "--end",
               "2031-01-04T00:00", "--group", "db")
    # Then it holds both customers' hosts in the group, and each customer is shown it
    frozen = _frozen(api.database_url)
    assert frozen["acme-01"] == "q4:close" and frozen["globex-01"] == "q4:close"
    for tenant in ("acme", "globex"):
        token = api.token(f"{tenant}-dash", "--role", "customer-viewer", "--tenant", tenant)
        assert api("GET", "/windows/q4:close", token).status_code == 200
