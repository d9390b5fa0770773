"""The customer's view of the web console on a real server (``scheduler.server.console.customer``
and ``.windows``): a customer-approver of acme sees the window that waits for it on its home
page, approves it with a comment on the window's page, and the page and the record then say
so; a denial without a comment, a form without the CSRF field and a decision on a version
that changed since are refused and record nothing; a customer-viewer has no buttons and is
refused the POST; acme is answered 404 for globex's window and never shown globex's hosts.
The tests share the module's server (tests/server/console/conftest.py) and its customers; the
test that edits a window edits one of its own, and each judges the decisions made while it
ran."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.server.conftest import Api
from tests.server.console.conftest import Browsing, Console
from tests.submit_support import sql_rows
from tests.tenants_support import customers_ini

PAGES = ("/ui/customer", "/ui/calendar", "/ui/windows/acme-sat", "/ui/windows/both")


@pytest.fixture(scope="module")
def customers(shared_console: tuple[Api, Path],
              tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the module's server: acme (two hosts) and globex (one), a window of each awaiting its
    customer, one over a host of each, and a freeze of acme's."""
    cli, tmp_path = shared_console[0].cli, tmp_path_factory.mktemp("customers")
    source = tmp_path / "customers.ini"
    source.write_text(customers_ini(acme=("acme-01", "acme-02"), globex=("globex-01",)))
    cli.ok("hosts", "import", str(source))
    for name, assign in (("acme-sat", ["--group", "acme"]),
                         ("globex-sun", ["--group", "globex"]),
                         ("both", ["--host", "acme-01", "--host", "globex-01"])):
        cli.ok("windows", "add", name, "--rrule", "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22",
               "--duration", "4h", "--tz", "Europe/Berlin", "--requires-approval",
               operator="alice")
        cli.ok("windows", "assign", name, *assign, operator="alice")
    cli.ok("windows", "freeze", "acme-close", "--start", "2030-12-20T00:00", "--end",
           "2031-01-04T00:00", "--group", "acme", operator="alice")


def _approver(console: Console) -> Browsing:
    return console.as_role("customer-approver", tenant="acme", owner="ann")


def _decisions(console: Console) -> list[object]:
    return sql_rows(console.api.database_url, "SELECT id FROM window_approvals")


def test_an_approver_sees_its_pending_window_and_approves_it_with_a_comment(
        console: Console, customers: None) -> None:
    ann = _approver(console)
    # Given acme's home page: its hosts, the windows awaiting it, its freeze; nothing of globex
    home = ann.get("/ui/customer")
    assert home.status_code == 200, home.text[:500]
    assert 'href="/ui/windows/acme-sat"' in home.text and 'href="/ui/windows/both"' in home.text
    assert 'href="/ui/hosts/acme-01"' in home.text and "acme-close" in home.text
    assert "globex" not in home.text
    # And the team's first page sends acme here
    assert ann.get("/ui/").headers["location"] == "/ui/customer"
    # When ann opens the window: its definition, its openings pending, the decision forms
    page = ann.get("/ui/windows/acme-sat")
    assert page.status_code == 200, page.text[:500]
    assert "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22" in page.text and "Europe/Berlin" in page.text
    assert '<label for="comment">Comment</label>' in page.text
    assert '<textarea id="comment" name="comment"' in page.text
    assert '<input type="hidden" name="version" value="1">' in page.text
    assert ">Approve</button>" in page.text and ">Deny</button>" in page.text
    assert "pending approval" in page.text and "opening-approved" not in page.text
    # And approves it, with a comment
    done = ann.post("/ui/windows/acme-sat/approve", {"comment": "ok for December",
                                                     "version": "1"})
    # Then she is sent back to the window, which shows the decision and its openings approved
    assert done.status_code == 303, done.text[:500]
    assert done.headers["location"] == "/ui/windows/acme-sat"
    page = ann.get("/ui/windows/acme-sat")
    assert "opening-approved" in page.text and "pending approval" not in page.text
    assert "approved by ann" in page.text and "ok for December" in page.text
    assert "Revoke your approval" in page.text
    # And the record has the decision, with her principal
    (event,) = sql_rows(console.api.database_url,
                        "SELECT operator, data FROM events WHERE kind = 'window-approve'")
    data = json.loads(event.data) if isinstance(event.data, str) else event.data
    assert event.operator == "ann" and data["comment"] == "ok for December"
    assert data["version"] == 1 and data["tenant"] == "acme"
    assert data["principal"]["role"] == "customer-approver"
    # And the window no longer waits on acme's home page
    home = ann.get("/ui/customer")
    assert 'href="/ui/windows/acme-sat"' not in home.text
    # When a task runs in windows on acme-02 (acme-01's own window awaits globex too), its job
    # waits on the window, whose page lists it
    task = console.api.cli.submit("command", "--target", "acme-02", "--param", "cmd=true",
                                  "--in-window")
    page = ann.get("/ui/windows/acme-sat")
    assert f'href="/ui/tasks/{task}"' in page.text and f"<td>{task}.0</td>" in page.text
    # When she revokes it, it waits for acme again
    assert ann.post("/ui/windows/acme-sat/revoke").status_code == 303
    assert "pending approval" in ann.get("/ui/windows/acme-sat").text


def test_a_decision_without_a_comment_csrf_or_on_an_old_version_is_refused(
        console: Console, customers: None) -> None:
    # Given a window of acme's own, as acme-sat is (this test changes it)
    cli = console.api.cli
    cli.ok("windows", "add", "acme-fri", "--rrule", "FREQ=WEEKLY;BYDAY=FR;BYHOUR=22",
           "--duration", "4h", "--tz", "Europe/Berlin", "--requires-approval", operator="alice")
    cli.ok("windows", "assign", "acme-fri", "--group", "acme", operator="alice")
    before = _decisions(console)
    ann = _approver(console)
    # A denial without a comment: the verb's one line, nothing recorded
    refused = ann.post("/ui/windows/acme-fri/deny", {"comment": " ", "version": "1"})
    assert refused.status_code == 400
    assert "a denial needs a comment saying why" in refused.text
    assert "Traceback" not in refused.text
    # An approval without the CSRF field: 403, nothing recorded
    forged = ann.post("/ui/windows/acme-fri/approve", {"comment": "x", "version": "1"},
                      csrf=False)
    assert forged.status_code == 403
    assert _decisions(console) == before
    # When the window changes after ann read version 1, her approval of it is refused (409)
    cli.ok("windows", "edit", "acme-fri", "--duration", "3h", operator="alice")
    stale = ann.post("/ui/windows/acme-fri/approve", {"comment": "ok", "version": "1"})
    assert stale.status_code == 409
    assert "is at version 2, not 1" in stale.text
    assert _decisions(console) == before
    # A denial with a comment, on the current version, is recorded and shown
    assert ann.post("/ui/windows/acme-fri/deny", {"comment": "quarter close",
                                                  "version": "2"}).status_code == 303
    page = ann.get("/ui/windows/acme-fri")
    assert "opening-denied" in page.text and "quarter close" in page.text
    assert len([d for d in _decisions(console) if d not in before]) == 1


def test_a_customer_viewer_has_no_buttons_and_is_refused_the_post(
        console: Console, customers: None) -> None:
    before = _decisions(console)
    viewer = console.as_role("customer-viewer", tenant="acme")
    page = viewer.get("/ui/windows/acme-sat")
    assert page.status_code == 200
    assert ">Approve</button>" not in page.text and ">Deny</button>" not in page.text
    assert viewer.post("/ui/windows/acme-sat/approve", {"comment": "x"}).status_code == 403
    assert viewer.post("/ui/windows/acme-sat/deny", {"comment": "x"}).status_code == 403
    assert _decisions(console) == before
    # And an operator of the team, whose party the window does not await, has none either
    operator = console.as_role("window-admin", owner="bob")
    page = operator.get("/ui/windows/acme-sat")
    assert page.status_code == 200 and ">Approve</button>" not in page.text


def test_acme_is_answered_404_for_globex_window_and_is_never_shown_globex(
        console: Console, customers: None) -> None:
    before = _decisions(console)
    console.api.cli.submit("command", "--target", "group:globex", "--param", "cmd=true",
                           "--in", "1h")
    ann = _approver(console)
    # Globex's window is not there for acme, GET and POST alike
    for reply in (ann.get("/ui/windows/globex-sun"),
                  ann.post("/ui/windows/globex-sun/approve", {"comment": "x"}),
                  ann.post("/ui/windows/globex-sun/deny", {"comment": "x"}),
                  ann.post("/ui/windows/globex-sun/revoke")):
        assert reply.status_code == 404, reply.text[:300]
        assert "no window named &#39;globex-sun&#39;" in reply.text
    assert _decisions(console) == before
    # And no page of acme's names globex, its hosts, its window or its task
    for path in PAGES:
        page = ann.get(path)
        assert page.status_code == 200, (path, page.text[:300])
        assert "globex" not in page.text.lower(), path
    # The window over both customers' hosts shows acme only its own host
    both = ann.get("/ui/windows/both").text
    assert re.search(r'href="/ui/hosts/acme-01"', both)
    # A principal of the team has no customer view, only a pointer to the fleet
    team = console.as_role("viewer")
    page = team.get("/ui/customer")
    assert page.status_code == 200 and "No customer view" in page.text
    assert 'href="/ui/"' in page.text
