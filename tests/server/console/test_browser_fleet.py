"""Signing in and Fleet now in a real browser (``tests/server/console/browser.py``): the token
typed in the sign-in form, the fleet page drawn, then changed live over Server-Sent Events
while the page stays open (no reload), with no script error nor content-security refusal."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.server.console.browser import WAIT_MS, InBrowser


def test_an_operator_signs_in_with_a_token_and_sees_a_task_appear_live(
        browser_page: InBrowser) -> None:
    page = browser_page.page
    # Given an operator who signs in through the form
    browser_page.sign_in("operator", owner="olga")
    # Then the fleet page is hers, and its stream says it is live
    expect(page).to_have_url(f"{browser_page.root}/ui/")
    expect(page.get_by_role("heading", name="Fleet now", level=1)).to_be_visible()
    expect(page.get_by_text("olga · operator")).to_be_visible()
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=WAIT_MS)
    queue = page.locator("#queue")
    expect(queue).to_contain_text("No task is running.")
    marker = page.evaluate("() => { window.notReloaded = 'still'; return window.notReloaded }")
    assert marker == "still"
    # When a task is submitted at the shell while the page is open (five hosts, in an hour)
    task_id = browser_page.console.api.cli.submit(
        "command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate", "--in", "1h",
        operator="olga")
    # Then it appears among the running tasks, with a link to its page and five jobs waiting
    row = queue.get_by_role("row").filter(has=page.get_by_role("link", name=str(task_id),
                                                               exact=True))
    expect(row).to_be_visible(timeout=WAIT_MS)
    expect(row).to_contain_text("0/5")
    expect(queue.locator("dt", has_text="Waiting for later").locator("xpath=..")
           ).to_contain_text("5")
    # And the health checks arrived on the same stream
    expect(page.locator("#health .findings li").first).to_be_visible(timeout=WAIT_MS)
    # Without a reload: the page's own state is still there
    assert page.evaluate("() => window.notReloaded") == "still"
    # When the task is cancelled at the shell, it leaves the running tasks, live again
    browser_page.console.api.cli.ok("tasks", "cancel", str(task_id), operator="olga")
    expect(queue).to_contain_text("No task is running.", timeout=WAIT_MS)
    assert browser_page.errors == []


def test_a_wrong_token_stays_on_the_sign_in_page_with_one_line(browser_page: InBrowser) -> None:
    page = browser_page.page
    browser_page.go("/ui/?from=bookmark")
    # The page asked for without a session sends the browser to sign in, and back after
    expect(page).to_have_url(f"{browser_page.root}/ui/login?next=%2Fui%2F%3Ffrom%3Dbookmark")
    page.get_by_label("API token").fill("fst_nope_nope")
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("alert")).to_have_text("that token is unknown, expired or revoked")
    assert "/ui/login" in page.url
    assert browser_page.errors == []


def test_signing_out_ends_the_session_in_the_browser(browser_page: InBrowser) -> None:
    page = browser_page.page
    browser_page.sign_in("viewer")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{browser_page.root}/ui/login")
    # The fleet page asks to sign in again
    browser_page.go("/ui/")
    expect(page).to_have_url(f"{browser_page.root}/ui/login?next=%2Fui%2F")
