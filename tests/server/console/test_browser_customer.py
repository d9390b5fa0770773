"""A customer approving a window in a real browser (``tests/server/console/browser.py``): the
approver of acme signs in, lands on its own view, follows the window waiting for it, types a
comment and presses Approve, and the page then shows the opening approved with the comment;
its three pages (its view, the window, the calendar) pass the accessibility check, with no
script error nor content-security refusal, and name nothing of globex."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

from tests.server.console.accessibility import problems
from tests.server.console.browser import InBrowser, screenshot
from tests.tenants_support import customers_ini


def test_a_customer_approves_its_window_in_the_browser(browser_page: InBrowser,
                                                        tmp_path: Path) -> None:
    page = browser_page.page
    cli = browser_page.console.api.cli
    # Given acme's and globex's hosts, and a window over acme's that waits for acme
    inventory = tmp_path / "customers.ini"
    inventory.write_text(customers_ini(acme=("acme-01", "acme-02"), globex=("globex-01",)))
    cli.ok("hosts", "import", str(inventory))
    for name, group in (("acme-sat", "acme"), ("globex-sun", "globex")):
        cli.ok("windows", "add", name, "--rrule", "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22",
               "--duration", "4h", "--tz", "Europe/Berlin", "--requires-approval",
               operator="alice")
        cli.ok("windows", "assign", name, "--group", group, operator="alice")
    # When acme's approver signs in, the console opens on its own view
    browser_page.sign_in("customer-approver", tenant="acme", owner="ann")
    expect(page).to_have_url(f"{browser_page.root}/ui/customer")
    expect(page.get_by_role("heading", level=1)).to_have_text("Customer acme")
    assert problems(page) == [], page.url
    assert "globex" not in page.content()
    screenshot(page, "customer")
    # And she follows the window waiting for her
    page.get_by_role("link", name="acme-sat").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Window acme-sat")
    expect(page.get_by_text("pending approval").first).to_be_visible()
    assert problems(page) == [], page.url
    screenshot(page, "window")
    # And approves it with a comment
    page.get_by_label("Comment", exact=True).fill("ok for December")
    page.get_by_role("button", name="Approve", exact=True).click()
    # Then the window's page shows its openings approved, by her, with the comment
    expect(page).to_have_url(f"{browser_page.root}/ui/windows/acme-sat")
    expect(page.locator(".tag.opening-approved").first).to_have_text("approved")
    expect(page.get_by_text("approved by ann").first).to_be_visible()
    expect(page.get_by_text("ok for December").first).to_be_visible()
    # And the calendar shows acme's window only
    browser_page.go("/ui/calendar")
    expect(page.get_by_role("heading", level=1)).to_have_text("Calendar")
    assert problems(page) == [], page.url
    assert "globex" not in page.content()
    screenshot(page, "calendar-customer")
    assert browser_page.errors == []


def test_the_team_calendar_is_accessible_with_every_state(browser_page: InBrowser,
                                                          tmp_path: Path) -> None:
    page = browser_page.page
    cli = browser_page.console.api.cli
    # Given windows on group web in each state, a freeze and a schedule
    for name, cron, approval in (("web-nightly", "0 2 * * *", []),
                                 ("web-approved", "0 4 * * 1", ["--requires-approval"]),
                                 ("web-denied", "0 5 * * 2", ["--requires-approval"]),
                                 ("web-pending", "0 6 * * 3", ["--requires-approval"])):
        cli.ok("windows", "add", name, "--cron", cron, "--duration", "2h", *approval,
               operator="alice")
        cli.ok("windows", "assign", name, "--group", "web", operator="alice")
    cli.ok("windows", "approve", "web-approved", "--comment", "fine", operator="bob")
    cli.ok("windows", "deny", "web-denied", "--comment", "not this month", operator="bob")
    cli.ok("windows", "freeze", "web-freeze", "--start", "2030-01-01T00:00", "--end",
           "2030-01-02T00:00", "--group", "web", operator="alice")
    cli.ok("schedules", "add", "nightly", "command", "--cron", "0 3 * * *", "-t", "group:web",
           "-p", "cmd=true")
    # When a window admin opens the calendar
    browser_page.sign_in("window-admin", owner="bob", next_page="/ui/calendar")
    expect(page.get_by_role("heading", level=1)).to_have_text("Calendar")
    # Then each state is in the legend and the table in words, and the page passes the check
    for state, words in (("approved", "approved"), ("open", "no approval needed"),
                         ("pending", "pending approval"), ("denied", "denied")):
        expect(page.locator(f".tag.opening-{state}").first).to_have_text(words)
    expect(page.get_by_role("table", name="Every opening in the period, by group and window")
           ).to_be_visible()
    assert problems(page) == [], page.url
    screenshot(page, "calendar")
    # And the team may decide on the pending window from its page
    page.get_by_role("link", name="web-pending").first.click()
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    assert problems(page) == [], page.url
    assert browser_page.errors == []
