"""CSRF on every form of the console, in a real browser: each page's forms are listed in the
page, every form that posts must carry the session's ``csrf_token``, and each one posted from
the browser with that field changed (as a page of another site would have to guess it) is
refused with 403 and changes nothing: no task queued, the window still waiting, the session
still open. (Both tests browse the module's server, tests/server/console/conftest.py.)"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.server.console.browser import InBrowser
from tests.submit_support import sql_rows

FORMS = """() => [...document.forms].map((f, i) => ({
  index: i, action: f.getAttribute("action") || "",
  method: (f.getAttribute("method") || "get").toLowerCase(),
  csrf: f.querySelector("input[type=hidden][name=csrf_token]")?.value || null,
}))"""
# The form's own submit() posts it as the browser would, bypassing the fields' validation (a
# forged post need not fill them: the CSRF check comes first).
FORGE = """(i) => {
  const form = document.forms[i];
  form.querySelector("input[name=csrf_token]").value = "forged-" + Math.random();
  HTMLFormElement.prototype.submit.call(form);
}"""

# Every page with a form, as an admin who sees every button ({task}: a task waiting).
PAGES = ["/ui/", "/ui/submit", "/ui/windows/web-pending", "/ui/calendar", "/ui/tasks",
         "/ui/tasks/{task}", "/ui/hosts", "/ui/hosts/web-01", "/ui/audit",
         *(f"/ui/tasks/{{task}}/{verb}"
           for verb in ("cancel", "pause", "resume", "continue", "retry-failed"))]


def _post_forms(browser_page: InBrowser, path: str) -> list[dict[str, object]]:
    browser_page.go(path)
    expect(browser_page.page.locator("main h1")).to_be_visible()
    forms = browser_page.page.evaluate(FORMS)
    posting = [f for f in forms if f["method"] == "post"]
    for form in posting:
        assert form["csrf"], f"{path}: the form posting to {form['action']} has no CSRF field"
    return posting


def _forged(browser_page: InBrowser, path: str, index: int) -> int:
    """Load ``path``, post its ``index``-th form with a wrong CSRF token: the answer's status."""
    page = browser_page.page
    browser_page.go(path)
    with page.expect_navigation() as answer:
        page.evaluate(FORGE, index)
    assert answer.value is not None
    if answer.value.status == 403:
        expect(page.get_by_text("CSRF").first).to_be_visible()
    return answer.value.status


def test_every_form_refuses_a_wrong_csrf_token(browser_page: InBrowser) -> None:
    cli = browser_page.console.api.cli
    # Given a window waiting for approval on group web
    cli.ok("windows", "add", "web-pending", "--cron", "0 6 * * 3", "--duration", "2h",
           "--requires-approval", operator="alice")
    cli.ok("windows", "assign", "web-pending", "--group", "web", operator="alice")
    # And a task waiting to start in an hour
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate",
                      "--in", "1h")
    tasks = "SELECT id, state FROM tasks"
    before = [(r.id, r.state) for r in sql_rows(browser_page.console.api.database_url, tasks)]
    assert (task, "active") in before
    browser_page.sign_in("admin", owner="ada")
    page = browser_page.page
    seen = 0
    for path in (p.format(task=task) for p in PAGES):
        for form in _post_forms(browser_page, path):
            # When the form is posted with a wrong token, then it is refused
            assert _forged(browser_page, path, int(form["index"])) == 403, (path, form)  # type: ignore[call-overload]
            seen += 1
    # And the submit form's next step, the confirmation, refuses one too
    browser_page.go("/ui/submit")
    options = page.get_by_role("form", name="With options")
    options.get_by_label("Action").select_option("command")
    options.get_by_label("Target").fill("group:web")
    options.get_by_label("Parameters").fill("cmd=true")
    options.get_by_role("button", name="Show the plan").click()
    confirm = page.get_by_role("button", name="Confirm")
    expect(confirm).to_be_visible()
    index = page.evaluate("() => [...document.forms].findIndex("
                          "f => f.querySelector('button')?.textContent.startsWith('Confirm'))")
    assert index >= 0
    with page.expect_navigation() as answer:
        page.evaluate(FORGE, index)
    assert answer.value is not None and answer.value.status == 403
    # Then the forms were there to be tried (sign out, submit, approve, deny, the controls)
    assert seen >= 4 + 5
    # And nothing changed: no other task, the task still waiting, the window still waits, the
    # session is still open
    rows = sql_rows(browser_page.console.api.database_url, tasks)
    assert [(r.id, r.state) for r in rows] == before
    browser_page.go("/ui/windows/web-pending")
    expect(page.get_by_text("pending approval").first).to_be_visible()
    browser_page.go("/ui/")
    expect(page.get_by_role("heading", name="Fleet now")).to_be_visible()
    assert browser_page.errors == []


def test_the_sign_in_form_refuses_a_changed_check_value(browser_page: InBrowser) -> None:
    page = browser_page.page
    token = browser_page.console.token("t", "--role", "viewer")
    browser_page.go("/ui/login")
    page.get_by_label("API token").fill(token)
    page.evaluate("() => { document.querySelector('input[name=check]').value = 'forged'; }")
    with page.expect_navigation() as answer:
        page.get_by_role("button", name="Sign in", exact=True).click()
    assert answer.value is not None and answer.value.status == 400
    expect(page.get_by_role("alert")).to_contain_text("expired")
    browser_page.go("/ui/")
    assert "/ui/login" in page.url
