"""What each role and each customer is shown, in a real browser: a customer sees its own hosts
only, and another customer's objects typed as direct URLs are a 404 page; the buttons and the
pages' links follow the role (a viewer has none that change anything, an operator and a window
admin have theirs), as the role table of ``scheduler.access.roles`` decides. Both tests browse
the module's server (tests/server/console/conftest.py), with its two customers."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.server.conftest import Api
from tests.server.console.browser import InBrowser
from tests.tenants_support import ACME_AND_GLOBEX

ACTION_BUTTONS = ("Approve", "Deny", "Revoke your approval", "Show the plan")
TASK_CONTROLS = ("Pause", "Resume", "Continue the rollout", "Retry failed jobs", "Cancel")
CUSTOMER_NAV = ["My hosts", "Tasks", "Calendar", "Hosts"]
TEAM_NAV = ["Fleet", "Tasks", "Calendar", "Hosts", "Audit"]


@pytest.fixture(scope="module")
def customers(shared_console: tuple[Api, Path],
              tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the module's server: acme (acme-01, acme-02) and globex (globex-01), a window each
    waiting for approval."""
    cli, tmp_path = shared_console[0].cli, tmp_path_factory.mktemp("customers")
    inventory = tmp_path / "customers.ini"
    inventory.write_text(ACME_AND_GLOBEX)
    cli.ok("hosts", "import", str(inventory))
    for name, group in (("acme-sat", "acme"), ("globex-sun", "globex")):
        cli.ok("windows", "add", name, "--cron", "0 22 * * 6", "--duration", "4h",
               "--requires-approval", operator="alice")
        cli.ok("windows", "assign", name, "--group", group, operator="alice")


def _status_of(page: Page, path: str, root: str) -> int:
    answer = page.goto(f"{root}{path}")
    assert answer is not None
    return answer.status


def _nav(page: Page) -> list[str]:
    return page.get_by_role("navigation", name="Pages").get_by_role("link").all_inner_texts()


def _controls(page: Page) -> set[str]:
    """The task page's control buttons (links to their confirmations)."""
    shown = page.locator("main nav.actions").get_by_role("link").all_inner_texts()
    return {c.strip() for c in shown} & set(TASK_CONTROLS)


def _buttons(page: Page) -> set[str]:
    shown = {b.strip() for b in page.locator("main").get_by_role("button").all_inner_texts()}
    return shown & set(ACTION_BUTTONS)


def test_a_customer_sees_its_own_hosts_and_another_customers_are_not_found(
        browser_page: InBrowser, customers: None) -> None:
    page, root = browser_page.page, browser_page.root
    cli = browser_page.console.api.cli
    simulate = ["-p", "cmd=true", "--executor", "simulate", "--in", "1h"]
    globex_task = cli.submit("command", "-t", "group:globex", *simulate)
    both_task = cli.submit("command", "-t", "group:acme,group:globex", *simulate)
    # When acme's approver signs in
    browser_page.sign_in("customer-approver", tenant="acme", owner="ann")
    # Then its view lists its two hosts and nothing of globex
    expect(page).to_have_url(f"{root}/ui/customer")
    expect(page.locator("main")).to_contain_text("acme-01")
    expect(page.locator("main")).to_contain_text("acme-02")
    assert "globex" not in page.content().lower()
    # And its pages are the customer's (no fleet, no submit, no audit)
    assert _nav(page) == CUSTOMER_NAV
    # When it types the address of globex's window, then the page is not found
    assert _status_of(page, "/ui/windows/globex-sun", root) == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    assert "globex-01" not in page.content()
    # And so are globex's host and globex's task, typed as addresses
    assert _status_of(page, "/ui/hosts/globex-01", root) == 404
    assert _status_of(page, f"/ui/tasks/{globex_task}", root) == 404
    assert "globex-01" not in page.content()
    # While its own host, and its own part of the team's task over both, are there
    assert _status_of(page, "/ui/hosts/acme-01", root) == 200
    assert _status_of(page, f"/ui/tasks/{both_task}", root) == 200
    expect(page.locator("#hosts")).to_contain_text("acme-01")
    assert "globex" not in page.content().lower()
    # And the host search, by name or by group, finds none of globex's hosts
    browser_page.go("/ui/hosts")
    page.get_by_label("Name", exact=True).fill("globex*")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("No host matches.")).to_be_visible()
    browser_page.go("/ui/hosts?group=globex")
    assert "globex-01" not in page.content()
    # And its own window's page is there, covering its own hosts only
    assert _status_of(page, "/ui/windows/acme-sat", root) == 200
    expect(page.locator("main")).to_contain_text("acme-01")
    # And the team's fleet page is refused, not shown
    assert _status_of(page, "/ui/", root) in (303, 200)
    assert "Fleet now" not in page.content()
    assert browser_page.errors == []


def test_the_buttons_follow_the_role(browser_page: InBrowser, customers: None) -> None:
    page, root = browser_page.page, browser_page.root
    # And a window of the team's, on group web, waiting for the team's approval
    cli = browser_page.console.api.cli
    cli.ok("windows", "add", "web-pending", "--cron", "0 6 * * 3", "--duration", "2h",
           "--requires-approval", operator="alice")
    cli.ok("windows", "assign", "web-pending", "--group", "web", operator="alice")
    # And a task of the team's waiting on acme's hosts
    task = cli.submit("command", "-t", "group:acme", "-p", "cmd=true", "--executor",
                      "simulate", "--in", "1h")
    cases = [
        # (role, tenant, pages in the header, buttons on acme-sat's page, on web-pending's)
        ("viewer", None, TEAM_NAV, set(), set()),
        ("customer-viewer", "acme", CUSTOMER_NAV, set(), None),
        ("customer-approver", "acme", CUSTOMER_NAV, {"Approve", "Deny"}, None),
        # acme's window waits for acme, not for the team
        ("window-admin", None, TEAM_NAV, set(), {"Approve", "Deny"}),
        ("operator", None, ["Fleet", "Tasks", "Submit", "Calendar", "Hosts", "Audit"], set(),
         set()),
    ]
    for role, tenant, nav, on_acme, on_web in cases:
        page.context.clear_cookies()
        browser_page.sign_in(role, tenant=tenant)
        assert _nav(page) == nav, role
        assert _status_of(page, "/ui/windows/acme-sat", root) == 200, role
        assert _buttons(page) == on_acme, role
        web = _status_of(page, "/ui/windows/web-pending", root)
        if on_web is None:  # a customer: the team's window over no host of its own
            assert web == 404, role
        else:
            assert web == 200 and _buttons(page) == on_web, role
        # The task's controls: an operator's (and no customer role's)
        assert _status_of(page, f"/ui/tasks/{task}", root) == 200, role
        assert _controls(page) == ({"Pause", "Cancel"} if role == "operator" else set()), role
        confirm = _status_of(page, f"/ui/tasks/{task}/cancel", root)
        assert confirm == (200 if role == "operator" else 403), role
        # A page whose verb the role lacks is refused with a page, not shown
        if "Submit" not in nav:
            assert _status_of(page, "/ui/submit", root) == 403, role
            expect(page.get_by_role("heading", level=1)).to_have_text("Not allowed")
        else:
            assert _status_of(page, "/ui/submit", root) == 200, role
            assert _buttons(page) == {"Show the plan"}, role
    assert browser_page.errors == []
