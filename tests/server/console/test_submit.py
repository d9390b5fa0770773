"""Submitting from the web console (``scheduler.server.console.submit``) on a real server: the
form, the dry run's plan, the confirmation that submits one task however often it is posted,
a task file, a big plan (counts, the first 50 jobs, the random wave draw shown is the one
submitted), bad input answered with one line and nothing written, CSRF and roles. The tests
share the module's server (tests/server/console/conftest.py): each judges the tasks written
while it ran against those there when it began."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.server.conftest import HOSTS
from tests.server.console.conftest import Browsing, Console
from tests.submit_support import sql_rows


def _hidden(page: str) -> dict[str, str]:
    """The hidden fields of the plan page's confirmation form."""
    form = page[page.index('action="/ui/submit"'):]
    form = form[:form.index("</form>")]
    return {name: html.unescape(value) for name, value in
            re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)}


def _tasks(console: Console) -> list[tuple[int, str, str]]:
    return [tuple(r) for r in sql_rows(console.api.database_url,
                                      "SELECT id, operator, action FROM tasks ORDER BY id")]


def _new_tasks(console: Console, before: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The tasks written since ``_tasks`` gave ``before``."""
    return [task for task in _tasks(console) if task not in before]


def _plan(browsing: Browsing, **fields: str) -> str:
    reply = browsing.post("/ui/submit/plan", fields)
    assert reply.status_code == 200, reply.text[:2000]
    return reply.text


def test_the_plan_is_shown_first_and_its_confirmation_submits_one_task_however_often_posted(
        console: Console) -> None:
    before = _tasks(console)
    olga = console.as_role("operator", owner="olga")
    # Given the form, which offers the registered actions and a Parameters box
    page = olga.get("/ui/submit")
    assert page.status_code == 200, page.text[:500]
    assert '<option value="command"' in page.text and '<option value="copy"' in page.text
    assert '<label for="params">Parameters</label>' in page.text
    assert '<label for="task_file">Task file</label>' in page.text
    # When she asks for the plan of a rollout in waves, an hour from now
    plan = _plan(olga, action="command", target="group:web", params="cmd=systemctl reload x\n",
                 max_concurrency="2", waves="1,100%", **{"in": "1h"})
    # Then the plan names every host and the waves, and nothing is written yet
    for host in HOSTS:
        assert f"<td>{host}</td>" in plan
    assert "<caption>Waves</caption>" in plan and "cmd=systemctl reload x" in plan
    assert "Confirm: submit to 5 hosts" in plan
    assert _new_tasks(console, before) == []
    hidden = _hidden(plan)
    assert hidden["csrf_token"] == olga.csrf and len(hidden["idempotency_key"]) >= 20
    assert hidden["target"] == "group:web" and hidden["waves"] == "1,100%"
    # When she confirms
    reply = olga.post("/ui/submit", hidden)
    # Then one task is hers, with five jobs, and the browser goes to its page
    assert reply.status_code == 303, reply.text[:1000]
    ((task_id, operator, action),) = _new_tasks(console, before)
    assert reply.headers["location"] == f"/ui/tasks/{task_id}"
    assert (operator, action) == ("olga", "command")
    assert sql_rows(console.api.database_url, "SELECT count(*) FROM jobs WHERE task_id = :t",
                    t=task_id) == [(5,)]
    # And the same confirmation posted again (a double click) gives the same task back
    again = olga.post("/ui/submit", hidden)
    assert again.status_code == 303 and again.headers["location"] == f"/ui/tasks/{task_id}"
    assert len(_new_tasks(console, before)) == 1


def test_a_task_file_pasted_in_the_form_is_planned_and_submitted(console: Console) -> None:
    before = _tasks(console)
    olga = console.as_role("operator", owner="olga")
    text = "action: command\ntarget: web-01,web-03\nparams: {cmd: uptime}\nin: 1h\n"
    plan = _plan(olga, task_file=text)
    assert "<td>web-01</td>" in plan and "<td>web-03</td>" in plan and "web-02" not in plan
    assert "Confirm: submit to 2 hosts" in plan
    hidden = _hidden(plan)
    assert hidden["task_file"] == text
    reply = olga.post("/ui/submit", hidden)
    assert reply.status_code == 303, reply.text[:1000]
    ((task_id, operator, _action),) = _new_tasks(console, before)
    assert operator == "olga"
    assert sql_rows(console.api.database_url,
                    "SELECT host FROM jobs WHERE task_id = :t ORDER BY host", t=task_id) == [
        ("web-01",), ("web-03",)]


@pytest.mark.parametrize(("fields", "line"), [
    ({"action": "nope", "target": "group:web", "params": "cmd=true"},
     "unknown action 'nope'"),
    ({"action": "command", "target": "group:web", "params": "cmd"},
     "parameter 'cmd' is not NAME=VALUE"),
    ({"action": "command", "target": "group:nosuch", "params": "cmd=true"},
     "target term 'group:nosuch': no group named 'nosuch'"),
    ({"action": "command", "target": "group:web", "params": "cmd=true",
      "max_concurrency": "lots"}, "max_concurrency 'lots' is not a count"),
    ({"task_file": "action: command\ntarget: [web-01\n"}, "task file:3: not valid YAML"),
    ({"task_file": "action: command\ntarget: web-01\nparams: {cmd: x}\nfrobnicate: 1\n"},
     "task file:4: unknown key 'frobnicate'"),
])
def test_bad_input_shows_the_form_again_with_one_line_and_writes_nothing(
        console: Console, fields: dict[str, str], line: str) -> None:
    before = _tasks(console)
    olga = console.as_role("operator", owner="olga")
    for path in ("/ui/submit/plan", "/ui/submit"):
        reply = olga.post(path, {**fields, "idempotency_key": "k-1"})
        # Then the form again: 400, the verb's one line, the input kept, no traceback
        assert reply.status_code == 400, (path, reply.text[:1000])
        (alert,) = re.findall(r'<p class="problem" role="alert">([^<]*)</p>', reply.text)
        assert line in html.unescape(alert) and "\n" not in alert, alert
        assert "Traceback" not in reply.text
        for value in fields.values():
            assert html.escape(value, quote=False).splitlines()[0] in reply.text
    # And nothing was written
    assert _tasks(console) == before


def test_a_form_without_the_csrf_token_submits_nothing(console: Console) -> None:
    before = _tasks(console)
    olga = console.as_role("operator", owner="olga")
    plan = _plan(olga, action="command", target="group:web", params="cmd=true",
                 **{"in": "1h"})
    hidden = {k: v for k, v in _hidden(plan).items() if k != "csrf_token"}
    assert olga.post("/ui/submit/plan", hidden, csrf=False).status_code == 403
    assert olga.post("/ui/submit", hidden, csrf=False).status_code == 403
    assert _tasks(console) == before


def test_a_viewer_may_not_submit(console: Console) -> None:
    before = _tasks(console)
    viewer = console.as_role("viewer")
    assert viewer.get("/ui/submit").status_code == 403
    reply = viewer.post("/ui/submit", {"action": "command", "target": "group:web",
                                       "params": "cmd=true", "idempotency_key": "k-2"})
    assert reply.status_code == 403
    assert 'href="/ui/submit"' not in viewer.get("/ui/hosts").text  # no link to the page
    assert _tasks(console) == before


def test_a_big_plan_shows_counts_and_its_first_fifty_jobs_and_the_draw_shown_is_submitted(
        console: Console, tmp_path: Path) -> None:
    (tmp_path / "bulk.ini").write_text("[bulk]\n" + "".join(f"bulk-{n:03}\n"
                                                            for n in range(1, 121)))
    console.api.cli.ok("hosts", "import", str(tmp_path / "bulk.ini"))
    olga = console.as_role("operator", owner="olga")
    # When she plans a rollout in random order over 120 hosts
    plan = _plan(olga, task_file="action: command\ntarget: group:bulk\nparams: {cmd: uptime}\n"
                                 "in: 1h\nwaves: 10,50%\nwave_order: random\n")
    # Then the page counts every host and wave and lists the first 50 jobs
    assert "Confirm: submit to 120 hosts" in plan and "(the first 50 of 120)" in plan
    assert len(re.findall(r"<td>bulk-\d{3}</td>", plan)) == 50
    assert re.findall(r'<tr><td>(\d)</td><td class="num">(\d+)</td></tr>', plan) == [
        ("1", "10"), ("2", "60"), ("3", "50")]
    # And the random draw it shows is the one the confirmation submits
    seed = _hidden(plan)["wave_seed"]
    assert f"this draw: seed {seed}" in plan
    done = olga.post("/ui/submit", _hidden(plan))
    assert done.status_code == 303, done.text[:1000]
    task_id = int(done.headers["location"].rsplit("/", 1)[1])
    ((waves,),) = sql_rows(console.api.database_url, "SELECT waves FROM tasks WHERE id = :t",
                           t=task_id)
    assert json.loads(waves)["seed"] == int(seed)
