"""The console's task pages (``scheduler.server.console.tasks``, ``task_page``, ``job_page``,
``task_controls``) on a real server, a real worker node where jobs must run (the ``local``
executor: each host's command runs on this machine with its name in ``FLEETSCHED_HOST``): the
list's filters and pages, a task's plan, its progress by state and by wave, its hosts filtered
and paged on the server, the live stream's fragments, a job's page, the controls with their
confirmations, CSRF and roles, and a customer kept to its own tasks. The tests share the
module's server (tests/server/console/conftest.py) and judge their own tasks; the task list's
test, which reads every task, has a server of its own."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis
import sqlalchemy as sa

from tests.server.conftest import worker_nodes
from tests.server.console.conftest import Browsing, Console
from tests.submit_support import Cli, sql_rows
from tests.tenants_support import customers_ini

# web-01 and web-02 fail with exit code 3 and say why; the others succeed.
FAILING = ("sh -c 'case $FLEETSCHED_HOST in web-01|web-02) echo BOOM on $FLEETSCHED_HOST; "
           "exit 3;; esac; echo fine on $FLEETSCHED_HOST'")


@pytest.fixture
def worker(console: Console, tmp_path: Path) -> Iterator[Callable[[], None]]:
    """``start()`` starts a worker node on the console's deployment; stopped afterwards."""
    with worker_nodes(tmp_path, console.redis_url, console.api.database_url) as start:
        yield start


def _submit(console: Console, *args: str, operator: str = "tester") -> int:
    return console.api.cli.submit(*args, operator=operator)


def _waiting(console: Console, target: str = "group:web", *more: str,
             operator: str = "tester") -> int:
    """A task whose jobs wait an hour (nothing runs them in the meantime)."""
    return _submit(console, "command", "--target", target, "--param", "cmd=true", "--in", "1h",
                   *more, operator=operator)


def _until(check: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def _task_state(console: Console, task_id: int) -> str:
    [(state,)] = sql_rows(console.api.database_url,
                          f"SELECT state FROM tasks WHERE id = {task_id}")
    return str(state)


def _ran_to_the_end(console: Console, task_id: int) -> None:
    def ended() -> bool:
        rows = sql_rows(console.api.database_url,
                        f"SELECT state FROM jobs WHERE task_id = {task_id}")
        return bool(rows) and all(r.state in ("succeeded", "failed") for r in rows)

    _until(ended, f"task {task_id}'s jobs to end")


def _rows(html: str) -> list[str]:
    """The job ids of the host table's rows in a page or fragment."""
    return re.findall(r'<tr data-job="([^"]+)"', html)


def _cell(html: str, state: str) -> int:
    """The summary's count of ``state`` (its first table: jobs by state)."""
    found = re.search(rf'data-state="{state}">(\d+)<', html)
    assert found, html[:2000]
    return int(found.group(1))


def _events(browsing: Browsing, path: str, until: Callable[[dict[str, str], bool], bool],
            timeout: float = 60.0) -> tuple[dict[str, str], bool]:
    """Read the SSE stream at ``path``: the last HTML of each fragment by id, and whether it
    ended, until ``until(fragments, ended)`` holds."""
    fragments: dict[str, str] = {}
    ended = False
    deadline = time.monotonic() + timeout
    with browsing.client.stream("GET", f"{browsing.root}{path}",
                                timeout=httpx.Timeout(timeout)) as reply:
        assert reply.status_code == 200, reply.read()[:300]
        assert reply.headers["content-type"].startswith("text/event-stream")
        name, data = "", []
        for line in reply.iter_lines():
            if line.startswith("event: "):
                name, data = line[7:], []
            elif line.startswith("data: ") or line == "data:":
                data.append(line[6:])
            elif line == "" and name:
                if name == "end":
                    ended = True
                else:
                    fragments[data[0]] = "\n".join(data[1:])
                name = ""
                if until(fragments, ended) or ended:
                    break
            assert time.monotonic() < deadline, f"the stream said only {sorted(fragments)}"
    return fragments, ended


@pytest.mark.own_server  # it lists every task of the record
def test_the_task_list_filters_and_pages_on_the_server(console: Console) -> None:
    # Given tasks of two operators, two actions and two targets
    first = _waiting(console, "group:web", operator="olga")
    second = _waiting(console, "web-01,web-02", operator="piet")
    third = _submit(console, "script", "--target", "group:web,!web-03", "--param",
                    "script=/bin/true", "--in", "1h", operator="olga")
    browsing = console.as_role("viewer")
    # When the list is read
    page = browsing.get("/ui/tasks")
    assert page.status_code == 200, page.text[:500]
    # Then every task links to its page, with action, target, operator, state and a bar
    for task_id in (first, second, third):
        assert f'href="/ui/tasks/{task_id}"' in page.text
    assert "group:web,!web-03" in page.text and '<svg class="bar"' in page.text
    # And the filters are applied on the server
    def listed(**params: str) -> set[int]:
        reply = browsing.get("/ui/tasks", params=params)
        assert reply.status_code == 200, reply.text[:500]
        return {int(n) for n in re.findall(r'href="/ui/tasks/(\d+)"', reply.text)}

    assert listed(operator="olga") == {first, third}
    assert listed(action="script") == {third}
    assert listed(group="web") == {first, third}  # an exclusion or a host list names no group
    assert listed(group="we") == set()
    assert listed(state="active") == {first, second, third}
    assert listed(state="succeeded") == set()
    assert listed(since="1h") == {first, second, third}
    assert listed(until="2000-01-01") == set()
    # And a page of two links to the next one, keeping the filters
    page = browsing.get("/ui/tasks", params={"limit": "2", "operator": "olga"})
    assert 'rel="next"' not in page.text
    page = browsing.get("/ui/tasks", params={"limit": "2"})
    assert re.findall(r'href="/ui/tasks/(\d+)"', page.text) == [str(third), str(second)]
    assert 'href="/ui/tasks?offset=2&amp;limit=2"' in page.text
    page = browsing.get("/ui/tasks", params={"limit": "2", "offset": "2"})
    assert re.findall(r'href="/ui/tasks/(\d+)"', page.text) == [str(first)]
    # And a bad filter is one line on a 400 page
    bad = browsing.get("/ui/tasks", params={"state": "sideways"})
    assert bad.status_code == 400 and "must be one of" in bad.text
    bad = browsing.get("/ui/tasks", params={"since": "yesterday-ish"})
    assert bad.status_code == 400 and "neither an ISO 8601 time nor a duration" in bad.text


def test_a_task_page_shows_its_plan_with_a_secret_as_its_reference(
        console: Console, tmp_path: Path) -> None:
    # Given a task whose secret parameter is given as a reference to the environment
    cli = Cli(tmp_path, console.redis_url, console.api.database_url,
              env={"FS_PAGE_SECRET": "hunter2-value"})
    task_id = cli.submit("key-rollover", "--target", "group:web", "-p", "pre_check=true",
                         "-p", "rollover=true", "-p", "post_check=true",
                         "-p", "secret=@env:FS_PAGE_SECRET", "--in", "1h",
                         "--max-concurrency", "2")
    page = console.as_role("viewer").get(f"/ui/tasks/{task_id}")
    assert page.status_code == 200, page.text[:500]
    # Then its plan names the action, the reference (never the value), target and policy
    plan = page.text.split('<section id="plan"', 1)[1].split("</section>", 1)[0]
    assert "key-rollover" in plan and "@env:FS_PAGE_SECRET" in plan
    assert "hunter2" not in page.text
    assert "group:web" in plan and "max concurrency: 2" in plan
    assert "submitted by tester" in plan and "freezes hold its jobs" in plan


def test_progress_by_state_and_by_wave_and_the_continue_control(
        console: Console, worker: Callable[[], None]) -> None:
    # Given a rollout in two waves with a gate, run by a worker, stopped at its gate
    worker()
    task_id = _submit(console, "command", "--target", "group:web", "--param", "cmd=true",
                      "--executor", "local", "--waves", "2,100%", "--wave-gate", "approve")
    operator = console.as_role("operator", owner="olga")

    _until(lambda: "pass the gate" in operator.get(f"/ui/tasks/{task_id}/continue").text,
           "the first wave to end at its gate")
    # (the waves count the record's job rows, which the recorders fill in behind the queue)
    _until(lambda: 'data-state="succeeded">2<' in operator.get(f"/ui/tasks/{task_id}").text
           .split('<table class="waves">', 1)[-1], "the record to hold the first wave's results")
    page = operator.get(f"/ui/tasks/{task_id}")
    summary = page.text.split('<section id="summary"', 1)[1].split("</section>", 1)[0]
    # Then the summary counts the jobs by state, and each wave's
    assert _cell(summary, "succeeded") == 2 and _cell(summary, "total") == 5
    waves = summary.split('<table class="waves">', 1)[1]
    first, second = re.findall(r'<tr data-wave="\d">(.*?)</tr>', waves, re.DOTALL)
    assert re.search(r'data-state="succeeded">2<', first)
    assert re.search(r'data-state="waiting">3<', second)
    # And the continue button leads to a confirmation naming the next wave's jobs; the live
    # summary brings it too (the controls the state allows now)
    assert f'href="/ui/tasks/{task_id}/continue"' in page.text
    fragments, _ = _events(operator, f"/ui/tasks/{task_id}/live", lambda got, done: "summary" in got)
    assert f'href="/ui/tasks/{task_id}/continue"' in fragments["summary"]
    confirm = operator.get(f"/ui/tasks/{task_id}/continue")
    assert '<div class="confirm">' in confirm.text
    assert (f"Continue task {task_id}: pass the gate after wave 1 of 2. Then wave 2 of 2 "
            "starts: 3 jobs.") in confirm.text
    assert f"Confirm: continue task {task_id}" in confirm.text
    # When the operator confirms, the rollout goes on to its end
    reply = operator.post(f"/ui/tasks/{task_id}/continue")
    assert reply.status_code == 303 and reply.headers["location"] == f"/ui/tasks/{task_id}"
    _ran_to_the_end(console, task_id)
    _until(lambda: _cell(operator.get(f"/ui/tasks/{task_id}").text, "succeeded") == 5,
           "the page to count five succeeded")
    [(by,)] = sql_rows(console.api.database_url, "SELECT operator FROM events WHERE kind = "
                       f"'continue' AND task_id = '{task_id}'")
    assert by == "olga"


def test_the_host_table_filters_and_pages_on_the_server_and_a_job_shows_its_output(
        console: Console, worker: Callable[[], None], tmp_path: Path) -> None:
    # Given a task whose two first hosts fail with exit code 3, run to its end
    worker()
    task_id = _submit(console, "command", "--target", "group:web", "--param", f"cmd={FAILING}",
                      "--executor", "local", "--retries", "0")
    _ran_to_the_end(console, task_id)
    viewer = console.as_role("viewer")

    def hosts(**params: str) -> list[str]:
        reply = viewer.get(f"/ui/tasks/{task_id}", params=params)
        assert reply.status_code == 200, reply.text[:500]
        return _rows(reply.text)

    failing = [f"{task_id}.0", f"{task_id}.1"]
    every = [f"{task_id}.{n}" for n in range(5)]
    _until(lambda: hosts(state="failed") == failing, "the failures in the record")
    # Then the host table filters by state, exit code and text in output or error
    assert hosts() == every
    assert hosts(state="succeeded") == every[2:]
    assert hosts(exit="3") == failing and hosts(exit="0") == every[2:]
    assert hosts(text="boom on WEB-02") == [f"{task_id}.1"]
    assert hosts(text="fine on web-0") == every[2:]
    assert hosts(text="100%") == [] and hosts(text="b_om") == []  # no wildcards in it
    assert hosts(state="failed", exit="0") == []
    bad = viewer.get(f"/ui/tasks/{task_id}", params={"exit": "three"})
    assert bad.status_code == 400 and "not a whole number" in bad.text
    # And the API filters alike
    token = console.token("reader", "--role", "viewer")
    api = console.api("GET", f"/tasks/{task_id}/jobs", token, params={"exit": 3, "text": "BOOM"})
    assert [j["id"] for j in api.json()["items"]] == failing
    # And each host links to its job's page: its attempts and what it printed
    page = viewer.get(f"/ui/tasks/{task_id}")
    assert f'href="/ui/jobs/{task_id}.0"' in page.text
    job = viewer.get(f"/ui/jobs/{task_id}.0")
    assert job.status_code == 200, job.text[:500]
    assert "web-01" in job.text and "failed" in job.text
    output = re.findall(r'<pre class="output">(.*?)</pre>', job.text, re.DOTALL)
    assert any("BOOM on web-01" in text for text in output), job.text[:3000]
    assert 'data-live="' not in job.text  # it ended: nothing to follow
    assert viewer.get("/ui/jobs/999.0").status_code == 404
    # And the stream of a finished task sends its summary and rows once, then ends
    fragments, ended = _events(viewer, f"/ui/tasks/{task_id}/live?state=failed",
                               lambda got, done: done)
    assert ended and _rows(fragments["hosts"]) == failing
    assert _cell(fragments["summary"], "failed") == 2


def test_the_host_table_pages_fifty_rows_and_the_stream_sends_only_the_visible_ones(
        console: Console, tmp_path: Path) -> None:
    # Given 60 hosts and a task on them whose jobs wait
    (tmp_path / "many.ini").write_text("[many]\n" + "".join(f"m-{n:03}\n" for n in range(60)))
    console.api.cli.ok("hosts", "import", str(tmp_path / "many.ini"))
    task_id = _waiting(console, "group:many")
    viewer = console.as_role("viewer")
    # Then its page shows the first 50 hosts and links to the next page
    page = viewer.get(f"/ui/tasks/{task_id}")
    assert _rows(page.text) == [f"{task_id}.{n}" for n in range(50)]
    assert f'href="/ui/tasks/{task_id}?offset=50#hosts" rel="next"' in page.text
    later = viewer.get(f"/ui/tasks/{task_id}", params={"offset": "50"})
    assert _rows(later.text) == [f"{task_id}.{n}" for n in range(50, 60)]
    assert 'rel="next"' not in later.text and 'rel="prev"' in later.text
    # And the page follows a stream for the same filters and page
    assert f'data-live="/ui/tasks/{task_id}/live?state=pending&amp;offset=50"' in viewer.get(
        f"/ui/tasks/{task_id}", params={"state": "pending", "offset": "50"}).text
    # And that stream sends the summary and the rows in view only, and goes on
    fragments, ended = _events(viewer, f"/ui/tasks/{task_id}/live?offset=50",
                               lambda got, done: {"summary", "hosts"} <= set(got))
    assert not ended
    assert _rows(fragments["hosts"]) == [f"{task_id}.{n}" for n in range(50, 60)]
    assert _cell(fragments["summary"], "total") == 60
    # And a waiting job's page follows its attempts live
    job = viewer.get(f"/ui/jobs/{task_id}.3")
    assert f'data-live="/ui/jobs/{task_id}.3/live"' in job.text and "Not started yet" in job.text
    fragments, ended = _events(viewer, f"/ui/jobs/{task_id}.3/live",
                               lambda got, done: "attempts" in got)
    assert "Not started yet" in fragments["attempts"] and not ended


def test_an_operator_pauses_resumes_and_cancels_after_each_confirmation(
        console: Console) -> None:
    task_id = _waiting(console)
    operator = console.as_role("operator", owner="olga")
    page = operator.get(f"/ui/tasks/{task_id}")
    # Then a waiting task offers pause and cancel, not resume, continue or retry
    offered = set(re.findall(rf'class="button" href="/ui/tasks/{task_id}/([a-z-]+)"', page.text))
    assert offered == {"pause", "cancel"}
    # When she asks to pause it, the confirmation says what will happen
    confirm = operator.get(f"/ui/tasks/{task_id}/pause")
    assert confirm.status_code == 200
    assert (f"Pause task {task_id}: its 5 jobs that have not started are held, in their order, "
            "until it is resumed; 0 running jobs finish.") in confirm.text
    assert f'action="/ui/tasks/{task_id}/pause"' in confirm.text
    assert 'name="csrf_token"' in confirm.text and f'href="/ui/tasks/{task_id}"' in confirm.text
    assert re.search(r'<button type="submit"[^>]*>Confirm: pause task', confirm.text)
    # And confirming pauses it and brings her back to the task
    reply = operator.post(f"/ui/tasks/{task_id}/pause")
    assert reply.status_code == 303 and reply.headers["location"] == f"/ui/tasks/{task_id}"
    assert _task_state(console, task_id) == "paused"
    page = operator.get(f"/ui/tasks/{task_id}")
    offered = set(re.findall(rf'class="button" href="/ui/tasks/{task_id}/([a-z-]+)"', page.text))
    assert offered == {"resume", "cancel"}
    # And pausing again is refused with the verb's one line, on a 409 page
    again = operator.post(f"/ui/tasks/{task_id}/continue")
    assert again.status_code == 409 and "not rolled out in waves" in again.text
    # When she resumes it, then cancels it
    assert f"Resume task {task_id}: its 5 held jobs are released" in operator.get(
        f"/ui/tasks/{task_id}/resume").text
    assert operator.post(f"/ui/tasks/{task_id}/resume").status_code == 303
    assert _task_state(console, task_id) == "active"
    assert (f"Cancel task {task_id}: its 5 jobs that have not started will not run; 0 running "
            "jobs finish.") in operator.get(f"/ui/tasks/{task_id}/cancel").text
    assert operator.post(f"/ui/tasks/{task_id}/cancel").status_code == 303
    assert _task_state(console, task_id) == "cancelled"
    # Then each change is recorded as hers
    kinds = sql_rows(console.api.database_url, "SELECT kind, operator FROM events WHERE "
                     f"task_id = '{task_id}' AND job_id IS NULL AND kind IN ('pause', 'resume', 'cancel') "
                     "ORDER BY ts")
    assert list(dict.fromkeys((k.kind, k.operator) for k in kinds)) == [
        ("pause", "olga"), ("resume", "olga"), ("cancel", "olga")]
    # And a cancelled task offers no control
    page = operator.get(f"/ui/tasks/{task_id}")
    assert not re.findall(rf'class="button" href="/ui/tasks/{task_id}/', page.text)


def test_retry_failed_is_offered_for_failed_jobs_and_queues_them_again(
        console: Console, worker: Callable[[], None]) -> None:
    worker()
    task_id = _submit(console, "command", "--target", "web-01,web-03", "--param",
                      f"cmd={FAILING}", "--executor", "local", "--retries", "0")
    _ran_to_the_end(console, task_id)
    operator = console.as_role("operator")
    _until(lambda: f'href="/ui/tasks/{task_id}/retry-failed"' in operator.get(
        f"/ui/tasks/{task_id}").text, "the retry-failed button")
    confirm = operator.get(f"/ui/tasks/{task_id}/retry-failed")
    assert (f"Retry the failed jobs of task {task_id}: its 1 failed or lost job is queued "
            "again") in confirm.text
    assert operator.post(f"/ui/tasks/{task_id}/retry-failed").status_code == 303
    [(count,)] = sql_rows(console.api.database_url, "SELECT COUNT(*) FROM events WHERE kind = "
                          f"'retry-failed' AND task_id = '{task_id}'")
    assert count == 1


def test_a_viewer_has_no_controls_and_a_post_without_csrf_changes_nothing(
        console: Console) -> None:
    task_id = _waiting(console)
    viewer = console.as_role("viewer")
    # Then a viewer sees no control, and may neither ask for one nor post it
    page = viewer.get(f"/ui/tasks/{task_id}")
    assert page.status_code == 200 and 'class="button" href' not in page.text
    for verb in ("cancel", "pause", "resume", "continue", "retry-failed"):
        assert viewer.get(f"/ui/tasks/{task_id}/{verb}").status_code == 403, verb
        assert viewer.post(f"/ui/tasks/{task_id}/{verb}").status_code == 403, verb
    # And an operator's post without the CSRF token (or with another) is refused
    operator = console.as_role("operator")
    reply = operator.post(f"/ui/tasks/{task_id}/cancel", csrf=False)
    assert reply.status_code == 403 and "CSRF" in reply.text
    reply = operator.post(f"/ui/tasks/{task_id}/pause", {"csrf_token": "forged"}, csrf=False)
    assert reply.status_code == 403
    # And nothing changed
    assert _task_state(console, task_id) == "active"
    assert sql_rows(console.api.database_url, "SELECT kind FROM events WHERE task_id = "
                    f"'{task_id}' AND kind IN ('cancel', 'pause')") == []


def test_a_customer_sees_its_own_tasks_only(console: Console, tmp_path: Path) -> None:
    # Given acme's hosts and globex's, a task on each and one on both
    (tmp_path / "customers.ini").write_text(
        customers_ini(acme=("acme-01", "acme-02"), globex=("globex-01",)))
    console.api.cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    acme_task = _waiting(console, "group:acme")
    globex_task = _waiting(console, "group:globex")
    mixed = _waiting(console, "acme-01,globex-01")
    acme = console.as_role("customer-viewer", tenant="acme")
    # Then acme's list holds its tasks only, and no group filter
    listing = acme.get("/ui/tasks")
    assert listing.status_code == 200, listing.text[:500]
    assert set(re.findall(r'href="/ui/tasks/(\d+)"', listing.text)) == {str(acme_task),
                                                                       str(mixed)}
    assert 'name="group"' not in listing.text and "globex" not in listing.text
    assert acme.get("/ui/tasks", params={"group": "globex"}).status_code == 400
    # And the shared task's page shows its own host only, no target, no control
    page = acme.get(f"/ui/tasks/{mixed}")
    assert page.status_code == 200
    assert _rows(page.text) == [f"{mixed}.0"] and "acme-01" in page.text
    assert "globex" not in page.text and 'class="button" href' not in page.text
    assert _cell(page.text, "total") == 1
    # (its output is withheld: no search in it, which would tell what it says)
    assert 'name="text"' not in page.text
    assert acme.get(f"/ui/tasks/{mixed}", params={"text": "x"}).status_code == 400
    # And globex's task, job and stream are not found, as if they did not exist
    assert acme.get(f"/ui/tasks/{globex_task}").status_code == 404
    assert acme.get(f"/ui/jobs/{globex_task}.0").status_code == 404
    assert acme.get(f"/ui/jobs/{mixed}.1").status_code == 404  # globex-01's job of the mix
    assert acme.get(f"/ui/tasks/{globex_task}/live").status_code == 404
    assert acme.get(f"/ui/jobs/{globex_task}.0/live").status_code == 404
    # And the stream of the shared task sends its own host only
    fragments, _ = _events(acme, f"/ui/tasks/{mixed}/live",
                           lambda got, done: {"summary", "hosts"} <= set(got))
    assert _rows(fragments["hosts"]) == [f"{mixed}.0"]
    assert "globex" not in "".join(fragments.values())
    # And a customer may not cancel (403), even its own task
    assert acme.get(f"/ui/tasks/{acme_task}/cancel").status_code == 403
    assert acme.post(f"/ui/tasks/{acme_task}/cancel").status_code == 403


def test_a_job_killed_by_a_signal_shows_the_signal_as_its_exit_code(
        console: Console) -> None:
    from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all
    from tests.submit_support import drain

    # Given a job whose command sshd reported killed by SIGKILL (the ssh executor's error; no
    # exit code), recorded as a recorder records it
    engine = sa.create_engine(console.api.database_url)
    try:
        task_id, jobs = create_task_rows(engine, 1, hosts="web-0{:d}1")
    finally:
        engine.dispose()
    events = list(job_lifecycle(str(task_id), jobs, fail=frozenset({jobs[0][0]})))
    for ev in events:
        if ev["kind"] == "fail":
            ev.update(exit_code="", error="command: killed by signal SIGKILL on web-01 (x:22)")
    redis_client = redis.Redis.from_url(console.redis_url, decode_responses=True)
    try:
        xadd_all(redis_client, events)
        drain(redis_client, console.api.database_url)
    finally:
        redis_client.close()
    # When a viewer opens the job's page, its exit code is the signal's name
    viewer = console.as_role("viewer")
    job = viewer.get(f"/ui/jobs/{jobs[0][0]}")
    assert job.status_code == 200, job.text[:500]
    assert re.search(r"<dt>Exit code</dt><dd>SIGKILL</dd>", job.text), job.text[:3000]
    # and so is it in the task page's host table
    page = viewer.get(f"/ui/tasks/{task_id}")
    assert page.status_code == 200, page.text[:500]
    assert '<td class="num">SIGKILL</td>' in page.text, page.text[:3000]
