"""An accessibility check of the console's main pages in a real browser
(``tests/server/console/accessibility.py``): labels, names of images, headings, colour
contrast, and the keyboard (the skip link first, then the pages' links, focus visible). With
``FLEETSCHED_SCREENSHOTS=1`` the same visit writes docs/images/console-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.server.console.accessibility import keyboard_problems, problems
from tests.server.console.browser import InBrowser, screenshot

# (screenshot name, path, the role that signs in, what the page's h1 says)
PAGES = [
    ("fleet", "/ui/", "admin", "Fleet now"),
    ("submit", "/ui/submit", "operator", "Submit"),
]
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


@pytest.mark.parametrize("name, path, role, title", PAGES, ids=[p[0] for p in PAGES])
def test_a_main_page_is_accessible(browser_page: InBrowser, name: str, path: str, role: str,
                                   title: str) -> None:
    page = browser_page.page
    # Given a task waiting, so that the pages have rows to show
    browser_page.console.api.cli.submit(
        "command", "-t", "group:web", "-p", "cmd=uptime", "--executor", "simulate", "--in",
        "1h", operator="olga")
    browser_page.sign_in(role, owner="olga", next_page=path)
    expect(page.get_by_role("heading", level=1)).to_contain_text(title)
    if name == "fleet":  # its health checks come with the stream's first event
        expect(page.locator("#health .findings li").first).to_be_visible()
    assert problems(page) == [], page.url
    screenshot(page, name)
    assert browser_page.errors == []


def test_the_keyboard_reaches_the_skip_link_then_the_pages_links(
        browser_page: InBrowser) -> None:
    page = browser_page.page
    browser_page.sign_in("admin")
    assert keyboard_problems(page, NAV_OF_ADMIN) == []
