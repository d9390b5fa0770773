"""A host's job followed live in a real browser, on a real worker node: the job's page, open
before the job starts, shows it running, then its end and what the command printed, without
a reload; the task's page counts it in the same way."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import expect

from tests.server.console.browser import WAIT_MS, InBrowser

LONG_MS = 4 * WAIT_MS  # a node on a loaded machine starts and runs the job
# Run by the local executor on the node itself; long enough to be seen running.
COMMAND = "cmd=sh -c 'echo hello from $(hostname); sleep 6; echo bye'"


def test_a_jobs_page_follows_it_from_waiting_to_its_output_without_a_reload(
        browser_page: InBrowser, worker_node: Callable[[], None]) -> None:
    page, cli = browser_page.page, browser_page.console.api.cli
    # Given a job on web-01, due in a few seconds, and an operator on its page already
    task = cli.submit("command", "-t", "web-01", "-p", COMMAND, "--executor", "local",
                      "--in", "5s", operator="olga")
    browser_page.sign_in("operator", owner="olga", next_page=f"/ui/jobs/{task}.0")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Job {task}.0 on web-01")
    attempts = page.locator("#attempts")
    expect(attempts).to_contain_text("Not started yet.")
    expect(page.locator("[data-live-status]")).to_have_text("live")
    page.evaluate("() => { window.notReloaded = true; }")
    # When a node starts
    worker_node()
    # Then the page shows the job running, then its end with what it printed
    expect(attempts.locator("strong.state-running")).to_be_visible(timeout=LONG_MS)
    expect(attempts.locator("dd", has_text="running")).to_be_visible()
    expect(attempts.locator("strong.state-succeeded")).to_be_visible(timeout=LONG_MS)
    expect(attempts.locator("pre.output")).to_contain_text("hello from")
    expect(attempts.locator("pre.output")).to_contain_text("bye")
    expect(attempts.locator("dd", has_text="ms")).to_be_visible()  # its duration
    expect(page.locator("[data-live-status]")).to_have_text("finished")
    assert page.evaluate("() => window.notReloaded") is True
    # And the task's page counts it succeeded
    page.get_by_role("link", name=f"Task {task}").click()
    expect(page.locator("#summary td[data-state='succeeded']").first).to_have_text("1")
    assert browser_page.errors == []
