"""An accessibility check of the console's main pages in a real browser
(``tests/server/console/accessibility.py``): labels, names of images, headings, colour
contrast, and the keyboard (the skip link first, then the pages' links, focus visible). With
``FLEETSCHED_SCREENSHOTS=1`` the same visits write docs/images/console-*.png. (A customer's
pages, a window's and the calendar are checked, and drawn, by test_browser_customer.py.)"""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import expect

from tests.server.console.accessibility import keyboard_problems, problems
from tests.server.console.browser import WAIT_MS, InBrowser, screenshot

NAV_OF_ADMIN = ["Fleet", "Tasks", "Submit", "Calendar", "Hosts", "Audit"]


def test_the_sign_in_page_is_accessible(browser_page: InBrowser) -> None:
    page = browser_page.page
    browser_page.go("/ui/login")
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to fleetsched")
    assert problems(page) == []
    # Tab: the skip link, then the token's field
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "skip"
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "token"
    screenshot(page, "sign-in")


def test_the_team_pages_are_accessible(browser_page: InBrowser,
                                       worker_node: Callable[[], None]) -> None:
    page, cli = browser_page.page, browser_page.console.api.cli
    # Given a task that ran on the five hosts and one waiting to start, so pages have rows
    worker_node()
    done = cli.submit("command", "-t", "group:web", "-p", "cmd=uptime", "--executor",
                      "simulate", "--executor-option", "duration_ms=300", operator="olga")
    cli.ok("tasks", "wait", str(done), "--timeout", "120s")
    waiting = cli.submit("command", "-t", "group:web", "-p", "cmd=systemctl reload nginx",
                         "--executor", "simulate", "--in", "1h", "--name", "reload nginx",
                         operator="olga")
    browser_page.sign_in("admin", owner="ada")
    expect(page.locator("#health .findings li").first).to_be_visible(timeout=WAIT_MS)
    found: dict[str, list[str]] = {}
    # (screenshot, path, what its h1 says)
    pages = [("fleet", "/ui/", "Fleet now"), ("tasks", "/ui/tasks", "Tasks"),
             ("task", f"/ui/tasks/{done}", f"Task {done}"),
             ("task-confirm", f"/ui/tasks/{waiting}/cancel", f"task {waiting}"),
             ("submit", "/ui/submit", "Submit"), ("hosts", "/ui/hosts", "Hosts"),
             ("host", "/ui/hosts/web-01", "web-01"), ("audit", "/ui/audit", "Audit")]
    for name, path, title in pages:
        if path != "/ui/":
            browser_page.go(path)
        expect(page.get_by_role("heading", level=1)).to_contain_text(title)
        if name == "task":
            expect(page.locator("[data-live-status]")).to_have_text("finished")
        found[path] = problems(page)
        progress = page.get_by_role("heading", name="Progress")  # below the task's plan
        screenshot(page, name, at=progress if name == "task" else None)
    # And a job's page, from the task's hosts
    browser_page.go(f"/ui/tasks/{done}")
    page.locator("#hosts a[href^='/ui/jobs/']").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("web-0")
    found[page.url] = problems(page)
    screenshot(page, "job")
    # And the plan of a submission
    browser_page.go("/ui/submit")
    form = page.get_by_role("form", name="With options")
    form.get_by_label("Action").select_option("command")
    form.get_by_label("Target").fill("group:web")
    form.get_by_label("Parameters").fill("cmd=uptime")
    form.get_by_label("Waves", exact=True).fill("1,100%")
    form.get_by_role("button", name="Show the plan").click()
    expect(page.get_by_role("button", name="Confirm: submit to 5 hosts")).to_be_visible()
    found["the plan"] = problems(page)
    screenshot(page, "submit-plan")
    assert {path: lines for path, lines in found.items() if lines} == {}
    assert browser_page.errors == []


def test_the_keyboard_reaches_the_skip_link_then_the_pages_links(
        browser_page: InBrowser) -> None:
    page = browser_page.page
    browser_page.sign_in("admin")
    assert keyboard_problems(page, NAV_OF_ADMIN) == []
