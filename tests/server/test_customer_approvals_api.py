"""A customer approves a window over its own hosts through the HTTP API, with its own token
(issue 28 section 4), against a real ``fleetsched server`` process: the customer awaited
approves and the window is in use; another customer is answered as if the window did not
exist; roles that may not decide get 403; every decision is an event naming the token, the
version and the client's address; a bad body changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.server.conftest import Api
from tests.submit_support import sql_rows
from tests.tenants_support import ACME_AND_GLOBEX

INVENTORY = ACME_AND_GLOBEX


def _fleet(api: Api, tmp_path: Path) -> None:
    source = tmp_path / "tenants.ini"
    source.write_text(INVENTORY)
    api.cli.ok("hosts", "import", str(source))
    api.cli.ok("windows", "add", "acme-sat", "--rrule", "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22",
               "--duration", "4h", "--tz", "Europe/Berlin", "--requires-approval",
               operator="alice")
    api.cli.ok("windows", "assign", "acme-sat", "--group", "acme", operator="alice")


def test_a_customer_approves_its_window_with_its_token_and_others_cannot(
        api: Api, tmp_path: Path) -> None:
    _fleet(api, tmp_path)
    acme = api.token("acme-change-board", "--role", "customer-approver", "--tenant", "acme")
    globex = api.token("globex-change-board", "--role", "customer-approver", "--tenant",
                       "globex")
    acme_viewer = api.token("acme-dashboard", "--role", "customer-viewer", "--tenant", "acme")
    operator = api.token("ci", "--role", "operator")
    # The window awaits acme
    shown = api("GET", "/windows/acme-sat", acme).json()
    assert shown["pending"] == ["customer acme"] and shown["version"] == 1
    # Roles that may not decide: 403; another customer: 404, as for a window that is not there
    assert api("POST", "/windows/acme-sat/approve", operator).status_code == 403
    assert api("POST", "/windows/acme-sat/approve", acme_viewer).status_code == 403
    foreign = api("POST", "/windows/acme-sat/approve", globex)
    assert foreign.status_code == 404
    assert foreign.json()["error"]["message"] == "no window named 'acme-sat'"
    assert api("POST", "/windows/nope/approve", globex).json()["error"]["message"] == \
        "no window named 'nope'"
    # A body with an unknown key, or a denial without a reason: refused, nothing recorded
    assert api("POST", "/windows/acme-sat/approve", acme, json={"approve": True}).status_code \
        == 422
    denied = api("POST", "/windows/acme-sat/deny", acme, json={"comment": ""})
    assert denied.status_code == 400 and "needs a comment" in denied.json()["error"]["message"]
    assert not sql_rows(api.database_url, "SELECT id FROM window_approvals")
    # When acme approves, with a comment
    done = api("POST", "/windows/acme-sat/approve", acme,
               json={"comment": "ok for December", "expires": "40d"})
    assert done.status_code == 200, done.text
    body = done.json()
    assert (body["party"], body["version"], body["decision"]) == ("acme", 1, "approved")
    assert body["approval"].startswith("approved until ")
    # Then the window is in use, and the record names the token, the version and the address
    assert api("GET", "/windows/acme-sat", acme).json()["pending"] == []
    (event,) = sql_rows(api.database_url, "SELECT operator, data FROM events "
                                          "WHERE kind = 'window-approve'")
    data = json.loads(event.data) if isinstance(event.data, str) else event.data
    (token_id,) = [r.id for r in sql_rows(api.database_url, "SELECT id FROM api_tokens "
                                                            "WHERE name = 'acme-change-board'")]
    assert data["principal"] == {"via": f"token:{token_id}", "role": "customer-approver",
                                 "tenant": "acme", "source": "127.0.0.1"}
    assert data["version"] == 1 and data["comment"] == "ok for December"
    assert event.operator == "admin-at-shell"  # the token's owner: its creator, by default
    # And acme revokes it: pending again
    revoked = api("POST", "/windows/acme-sat/revoke", acme)
    assert revoked.status_code == 200 and revoked.json()["approval"] == "PENDING customer acme"


def test_a_customer_declares_a_freeze_over_its_hosts_and_not_over_others(
        api: Api, tmp_path: Path) -> None:
    _fleet(api, tmp_path)
    acme = api.token("acme-change-board", "--role", "customer-approver", "--tenant", "acme")
    viewer = api.token("acme-dashboard", "--role", "customer-viewer", "--tenant", "acme")
    body = {"name": "year-end", "start": "2030-12-20T00:00", "end": "2031-01-04T00:00",
            "tz": "Europe/Berlin", "groups": ["acme"]}
    assert api("POST", "/windows/freezes", viewer, json=body).status_code == 403
    foreign = api("POST", "/windows/freezes", acme, json={**body, "groups": ["globex"]})
    assert foreign.status_code == 404 and "no group named 'globex'" in foreign.text
    made = api("POST", "/windows/freezes", acme, json=body)
    assert made.status_code == 201, made.text
    assert made.json()["name"] == "acme:year-end"
    listed = [w["name"] for w in api("GET", "/windows", viewer).json()["items"]]
    assert "acme:year-end" in listed
