"""An operator's rollout in waves, done from a real browser on a real worker node: the task
file typed in the Submit page, its plan, the confirmation, then the task's page followed live
while wave 1 runs and its health check fails, so the rollout stops; the Continue button, its
confirmation naming what will happen, and the rest of the rollout followed live to its end."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import expect

from tests.server.console.browser import WAIT_MS, InBrowser, screenshot

# The local executor runs the command on the worker node itself: the check `false` really
# fails there. Waves: one host, then the other four.
TASK_FILE = """\
action: command
target: group:web
params:
  cmd: sleep 1
executor: local
waves: 1,100%
wave_check: "false"
"""
LONG_MS = 4 * WAIT_MS  # a rollout on a loaded machine: a node, five jobs, a check


def test_an_operator_follows_a_rollout_to_its_stop_and_continues_it(
        browser_page: InBrowser, worker_node: Callable[[], None]) -> None:
    page = browser_page.page
    worker_node()
    browser_page.sign_in("operator", owner="olga", next_page="/ui/submit")
    # When she submits the task file and reads its plan
    by_file = page.get_by_role("form", name="From a task file")
    by_file.get_by_label("Task file").fill(TASK_FILE)
    by_file.get_by_role("button", name="Show the plan").click()
    confirm = page.get_by_role("button", name="Confirm: submit to 5 hosts")
    expect(confirm).to_be_visible()
    confirm.click()
    # Then she is on the task's page, which follows the rollout live
    page.wait_for_url(lambda url: "/ui/tasks/" in url)
    task_id = page.url.rstrip("/").rsplit("/", 1)[1]
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Task {task_id}")
    status = page.locator("[data-live-status]")
    summary = page.locator("#summary")
    page.evaluate("() => { window.notReloaded = true; }")
    # And sees wave 1 stop at its failing check, with the reason, without a reload
    expect(summary).to_contain_text("Wave 1 of 2: stopped", timeout=LONG_MS)
    expect(summary).to_contain_text("check `false` failed on 1 of 1 hosts")
    expect(summary.locator('tr[data-wave="1"] [data-state="succeeded"]')).to_have_text("1")
    expect(summary.locator('tr[data-wave="2"] [data-state="waiting"]')).to_have_text("4")
    assert page.evaluate("() => window.notReloaded") is True
    expect(status).not_to_have_text("finished")
    screenshot(page, "task-stopped", at=page.get_by_role("heading", name="Progress"))
    # When she presses Continue, the confirmation names what will happen
    page.reload()  # the controls are drawn with the page: the stop came after it was drawn
    page.get_by_role("link", name="Continue the rollout").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Continue the rollout: task "
                                                              f"{task_id}")
    expect(page.locator(".confirm")).to_contain_text(
        f"Continue task {task_id}: the rollout stopped at wave 1 of 2")
    expect(page.locator(".confirm")).to_contain_text("Then wave 2 of 2 starts: 4 jobs.")
    button = page.get_by_role("button", name=f"Confirm: continue task {task_id}")
    assert button.inner_text().startswith("Confirm")
    button.click()
    # Then she is back on the task's page and follows the other wave to the task's end
    expect(page).to_have_url(f"{browser_page.root}/ui/tasks/{task_id}")
    expect(page.locator("#summary td[data-state='succeeded']").first).to_have_text(
        "5", timeout=LONG_MS)
    expect(page.locator(".heading .state-succeeded")
           .or_(page.locator("[data-live-status]", has_text="finished")).first
           ).to_be_visible(timeout=LONG_MS)
    # And the record names her as the one who continued it
    continued = browser_page.console.api.cli.ok("tasks", "show", task_id, "--events")
    assert "continue" in continued and "olga" in continued
    assert browser_page.errors == []
