"""A customer approving a window in a real browser, and a job then running in it, on a real
worker node: acme's approver finds the window open now that waits for its approval, approves
it; the team's task in windows on acme's hosts (refused before: no approved opening) then runs
in it, and acme follows that task to its end from its own view, shown its own hosts only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import expect

from tests.server.console.browser import WAIT_MS, InBrowser
from tests.tenants_support import ACME_AND_GLOBEX

LONG_MS = 4 * WAIT_MS  # a node on a loaded machine runs both jobs


def test_a_customer_approves_a_window_and_its_jobs_then_run_in_it(
        browser_page: InBrowser, worker_node: Callable[[], None], tmp_path: Path) -> None:
    page, cli = browser_page.page, browser_page.console.api.cli
    # Given acme's hosts, and a window over them open now (each day, all day) that
    # needs acme's approval
    (tmp_path / "customers.ini").write_text(ACME_AND_GLOBEX)
    cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    cli.ok("windows", "add", "acme-now", "--cron", "0 0 * * *", "--duration", "24h",
           "--requires-approval", operator="alice")
    cli.ok("windows", "assign", "acme-now", "--group", "acme", operator="alice")
    task = ["command", "-t", "group:acme", "-p", "cmd=true", "--executor", "simulate",
            "--in-window"]
    # And the team's task in windows on acme's hosts is refused: no opening is approved
    code, _, err = cli("submit", *task, "--yes", operator="olga")
    assert code == 2 and "no approved opening" in err, err
    # When acme's approver signs in, its view lists the window waiting for it
    browser_page.sign_in("customer-approver", tenant="acme", owner="ann")
    expect(page).to_have_url(f"{browser_page.root}/ui/customer")
    page.get_by_role("link", name="acme-now").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Window acme-now")
    expect(page.get_by_text("No job waits on this window.")).to_be_visible()
    # And it approves the window with a comment
    page.get_by_label("Comment", exact=True).fill("go ahead")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text("approved by ann").first).to_be_visible()
    # When the team submits the task again, with a node running
    worker_node()
    task_id = cli.submit(*task, operator="olga")
    # Then acme sees the task on its view, and follows it to both jobs succeeded, live
    browser_page.go("/ui/customer")
    page.get_by_role("link", name=str(task_id), exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Task {task_id}")
    expect(page.locator("#summary td[data-state='succeeded']").first).to_have_text(
        "2", timeout=LONG_MS)
    # And its page names its own hosts only
    hosts = page.locator("#hosts")
    expect(hosts).to_contain_text("acme-01")
    assert "globex" not in page.content()
    # And the jobs ran inside the window: none waits on it any more
    browser_page.go("/ui/windows/acme-now")
    expect(page.get_by_text("No job waits on this window.")).to_be_visible()
    assert browser_page.errors == []
