"""What a customer reads of its own jobs' output, on a real ``fleetsched server`` with a real
worker node (simulate executor): states and exit codes always; stdout, stderr and error lines
only where the task was submitted with ``customer_output`` (``--customer-output``), and then of
its own hosts only. Every read path says so alike: ``tasks output``, ``jobs show``, a task's
jobs, ``tasks show`` and the event stream, which serves a customer its own task filtered to
its own hosts, on the one poller its task's other followers share.

The tests share one server and one worker node (the module's, ``customers``): each submits
tasks of its own and makes tokens of its own names."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli_support import isolated_env, run_cli
from tests.server.conftest import Api, shared_api, worker_nodes
from tests.server.test_sse import _events, _followers
from tests.tenants_support import ACME_AND_GLOBEX

pytestmark = pytest.mark.xdist_group("server-customer-output")  # under -n: one process

CUSTOMERS_INI = ACME_AND_GLOBEX
EVERYONE = "acme-01,acme-02,globex-01,web-01"


@pytest.fixture(scope="module")
def customers(tmp_path_factory: pytest.TempPathFactory, api_record: Path) -> Iterator[Api]:
    """The module's server with acme's and globex's hosts beside the team's five, and a worker
    node running on its deployment (tests/server/conftest.py's ``worker_nodes``)."""
    tmp = tmp_path_factory.mktemp("customers")
    with shared_api(tmp, api_record) as api:
        (tmp / "customers.ini").write_text(CUSTOMERS_INI)
        api.cli.ok("hosts", "import", str(tmp / "customers.ini"))
        with worker_nodes(tmp, api.cli.redis_url, api.database_url) as start:
            start()
            yield api



def _submit(api: Api, token: str, target: str = EVERYONE, **more: Any) -> int:
    reply = api("POST", "/tasks", token, json={
        "action": "command", "target": target, "params": {"cmd": "uptime"},
        "executor": "simulate", "retries": 0,
        "executor_options": {"duration_ms": 100, "failure_rate": 1.0}, **more})
    assert reply.status_code == 201, reply.text
    task_id: int = reply.json()["task_id"]
    return task_id


def _get(api: Api, token: str, path: str, seen: list[str], **params: Any) -> Any:
    reply = api("GET", path, token, params=params)
    assert reply.status_code == 200, reply.text
    seen.append(reply.text)
    return reply.json()


def _remote(api: Api, token: str, *args: str) -> tuple[int, str, str]:
    """The CLI in remote mode, through this server with ``token``."""
    env = isolated_env(Path(api.cli.env["XDG_STATE_HOME"] or "/nonexistent"),
                       FLEETSCHED_TOKEN=token)
    return run_cli(["--server", api.base.removesuffix("/api/v1"), *args], env=env)


def _reads(api: Api, token: str, task_id: int, seen: list[str]) -> dict[str, Any]:
    """Everything a customer of acme reads of the task's jobs on acme-01, through the API."""
    output = _get(api, token, f"/tasks/{task_id}/output", seen, host="acme-01")["jobs"]
    jobs = _get(api, token, f"/tasks/{task_id}/jobs", seen)["items"]
    job = _get(api, token, f"/jobs/{jobs[0]['id']}", seen)
    shown = _get(api, token, f"/tasks/{task_id}", seen)
    return {"output": output, "jobs": jobs, "job": job, "show": shown}


def test_a_customer_reads_its_jobs_output_only_where_the_task_says_so(
        customers: Api) -> None:
    api = customers
    # Given two failing tasks over acme's, globex's and the team's hosts: one submitted
    # without the option, one with it (as a task file key, through the API)
    operator = api.token_named("ci", "--role", "operator")
    withheld = _submit(api, operator)
    shown = _submit(api, operator, customer_output=True)
    for task_id in (withheld, shown):
        assert api.cli("tasks", "wait", str(task_id), "--timeout", "60s")[0] == 3
    acme = api.token_named("acme", "--role", "customer-viewer", "--tenant", "acme")
    seen: list[str] = []
    # When acme reads the task submitted without the option
    hidden = _reads(api, acme, withheld, seen)
    # Then it gets its jobs' states and exit codes, and no output anywhere, saying so
    assert [(r["host"], r["state"], r["exit_code"], r["lines"], r["output_withheld"])
            for r in hidden["output"]] == [("acme-01", "failed", 1, [], True)]
    assert [(j["host"], j["state"], j["exit_code"], j["error"], j["output_withheld"])
            for j in hidden["jobs"]] == [("acme-01", "failed", 1, None, True),
                                         ("acme-02", "failed", 1, None, True)]
    job = hidden["job"]
    assert job["output_withheld"] is True and job["host"] == "acme-01"
    assert [(a["exit_code"], a["commands"], a["error"]) for a in job["attempts"]] == [
        (1, [], None)]
    assert hidden["show"]["output_withheld"] is True
    assert [f["error"] for f in hidden["show"]["failures"]] == [None, None]
    assert "[simulated]" not in "".join(seen)
    # When it reads the task submitted with the option
    seen_shown: list[str] = []
    read = _reads(api, acme, shown, seen_shown)
    # Then it gets its own hosts' output, and still nothing of another customer's host
    [row] = read["output"]
    assert row["output_withheld"] is False
    assert any("[simulated] acme-01: uptime" in line for line in row["lines"])
    assert [j["output_withheld"] for j in read["jobs"]] == [False, False]
    assert all(j["error"] for j in read["jobs"])
    assert read["job"]["attempts"][0]["commands"] and read["job"]["output_withheld"] is False
    assert read["show"]["output_withheld"] is False
    assert _get(api, acme, f"/tasks/{shown}/output", [], host="globex-01")["jobs"] == []
    everything = "".join(seen + seen_shown)
    assert "globex" not in everything
    assert "web-01" not in everything
    # And the CLI in remote mode with acme's token prints the same: no output, then its own
    for task_id, printed in ((withheld, False), (shown, True)):
        code, out, err = _remote(api, acme, "tasks", "output", str(task_id))
        assert code == 0, err
        assert "acme-01" in out and "acme-02" in out and "globex" not in out
        assert ("[simulated] acme-01: uptime" in out) is printed
        assert "[simulated]" not in out or printed
        code, out, err = _remote(api, acme, "jobs", "show", read["jobs"][0]["id"]
                                 if task_id == shown else hidden["jobs"][0]["id"])
        assert code == 0 and "acme-01" in out, err
        assert ("[simulated]" in out) is printed
    # While the team reads every host's output of both, as before
    viewer = api.token_named("dash", "--role", "viewer")
    for task_id in (withheld, shown):
        rows = api("GET", f"/tasks/{task_id}/output", viewer, params={"host": "globex-01"})
        [team_row] = rows.json()["jobs"]
        assert "output_withheld" not in team_row
        assert any("[simulated] globex-01" in line for line in team_row["lines"])
    assert api("GET", f"/tasks/{withheld}", viewer).json()["customer_output"] is False
    assert api("GET", f"/tasks/{shown}", viewer).json()["customer_output"] is True


def test_a_customers_event_stream_holds_its_own_hosts_and_their_output_as_the_task_says(
        customers: Api) -> None:
    api = customers
    operator = api.token_named("ci", "--role", "operator")
    withheld = _submit(api, operator)
    shown = _submit(api, operator, customer_output=True)
    foreign = _submit(api, operator, target="globex-01,web-01")
    acme = api.token_named("acme", "--role", "customer-approver", "--tenant", "acme")
    for task_id, output in ((withheld, False), (shown, True)):
        # When acme follows the task to its end
        events = _events(api, acme, task_id, timeout=90)
        text = repr(events)
        # Then its counts are its own two jobs', and so is the end ...
        progress = [data for name, data, _ in events if name == "progress"]
        assert progress and all(p["total"] == 2 for p in progress), progress
        name, end, _ = events[-1]
        assert name == "end" and (end["total"], end["failed"], end["exit_code"]) == (2, 2, 3)
        assert end["state"] == "failed"
        # ... its failures are its own hosts', numbered among its own ...
        failures = [(data, eid) for name, data, eid in events if name == "failure"]
        assert sorted(f["host"] for f, _ in failures) == ["acme-01", "acme-02"]
        assert [eid for _, eid in failures] == ["1", "2"]
        assert all(f["exit_code"] == 1 and f["output_withheld"] is not output
                   for f, _ in failures)
        # ... with their lines only where the task says so, and never another's host
        if output:
            assert all(f["last_lines"] and f["error"] for f, _ in failures)
        else:
            assert all(f["last_lines"] == [] and f["error"] is None for f, _ in failures)
            assert "[simulated]" not in text
        assert "globex" not in text and "web-01" not in text
        # One of its hosts asked for: that host's job, its output as the task says
        host = [d for n, d, _ in _events(api, acme, task_id, params={"host": "acme-02"})
                if n == "host"]
        assert host and [j["host"] for j in host[-1]["jobs"]] == ["acme-02"]
        assert bool(host[-1]["jobs"][0]["lines"]) is output
        # Another customer's host of the task, or a task of none of its hosts: not found
        assert api("GET", f"/tasks/{task_id}/events", acme,
                   params={"host": "globex-01"}).status_code == 404
    missing = api("GET", f"/tasks/{foreign}/events", acme)
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == f"no task {foreign}"


class _Follower:
    """One open stream, held until released once its first progress event came."""

    def __init__(self, api: Api, token: str, task_id: int, release: threading.Event) -> None:
        self.progress: dict[str, Any] | None = None
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, args=(api, token, task_id, release))
        self.thread.start()

    def _run(self, api: Api, token: str, task_id: int, release: threading.Event) -> None:
        import json

        try:
            with httpx.stream("GET", f"{api.base}/tasks/{task_id}/events", timeout=60,
                              headers={"Authorization": f"Bearer {token}"}) as reply:
                name = None
                lines = reply.iter_lines()  # held: dropping it would close the stream
                for line in lines:
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: ") and name == "progress":
                        self.progress = json.loads(line[6:])
                        break
                release.wait(60)
                del lines
        except httpx.HTTPError as exc:
            self.error = repr(exc)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_followers_of_mixed_roles_and_tenants_share_one_poller(
        customers: Api, release: threading.Event) -> None:
    api = customers
    # Given a task an hour ahead over acme's, globex's and the team's hosts
    operator = api.token_named("ci", "--role", "operator")
    task_id = _submit(api, operator, **{"in": "1h"})
    tokens = {"team": api.token_named("dash", "--role", "viewer"),
              "acme": api.token_named("acme", "--role", "customer-viewer", "--tenant", "acme"),
              "globex": api.token_named("globex", "--role", "customer-approver", "--tenant",
                                  "globex")}
    before = _followers(api, tokens["team"])
    # When four followers of each follow it at once
    followers = {who: [_Follower(api, token, task_id, release) for _ in range(4)]
                 for who, token in tokens.items()}
    deadline = time.monotonic() + 30
    while (not all(f.progress or f.error for fs in followers.values() for f in fs)
           and time.monotonic() < deadline):
        time.sleep(0.1)
    during = _followers(api, tokens["team"])
    time.sleep(3)
    later = _followers(api, tokens["team"])
    release.set()
    for fs in followers.values():
        for f in fs:
            f.thread.join(30)
    # Then each saw its own counts: the team the task's four jobs, a customer its own
    totals = {who: {(f.error or f.progress and f.progress["total"]) for f in fs}
              for who, fs in followers.items()}
    assert totals == {"team": {4}, "acme": {2}, "globex": {1}}
    # And all twelve were served by one feed, whose poller read once a second or so (with one
    # more query per poll for the customers' counts), not once per follower
    assert (during["followers"], during["feeds"]) == (12, 1), (before, during, later)
    polls = later["polls"] - during["polls"]
    assert 1 <= polls <= 6, (during, later)
    assert later["queries"] - during["queries"] <= 5 * polls
    assert before["feeds"] == 0


def test_a_customer_watching_a_task_through_the_server_counts_its_own_jobs_only(
        customers: Api) -> None:
    import json

    api = customers
    # Given a task over acme's two hosts, globex's and the team's, all failed
    operator = api.token_named("ci", "--role", "operator")
    task_id = _submit(api, operator)
    team_only = _submit(api, operator, target="web-01")
    for tid in (task_id, team_only):
        assert api.cli("tasks", "wait", str(tid), "--timeout", "60s")[0] == 3
    acme = api.token_named("acme", "--role", "customer-viewer", "--tenant", "acme")
    viewer = api.token_named("dash", "--role", "viewer")
    # When acme and the team watch it through the server (`tasks watch --once`)
    shown = {}
    for name, token in (("acme", acme), ("team", viewer)):
        code, out, err = _remote(api, token, "tasks", "watch", str(task_id), "--once",
                                 "-o", "json")
        assert code == 3, err  # the task failed: watch's exit code, as in direct mode
        [frame] = json.loads(out)
        shown[name] = (frame["total"], frame["failed"], frame["succeeded"])
    # Then acme's frame counts its own two jobs, the team's all four
    assert shown == {"acme": (2, 2, 0), "team": (4, 4, 0)}
    # And a task without a job of acme's is one acme cannot see, as one that does not exist
    code, out, err = _remote(api, acme, "tasks", "watch", str(team_only), "--once")
    assert (code, out) == _remote(api, acme, "tasks", "watch", "999", "--once")[:2]
    assert code != 0 and f"no task {team_only}" in err
    assert api("GET", f"/tasks/{team_only}/progress", acme).status_code == 404
