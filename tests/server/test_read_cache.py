"""The server's brief read cache (``scheduler/server/read_cache.py``) on a real server: what it
serves is at most ``server_read_cache_ms`` old, never older than a write the server served, never
another role's or tenant's answer, never to a revoked token, and never to a request that says
``Cache-Control: no-cache`` (the CLI's); one request computes an answer many wait for."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from scheduler.server.read_cache import ReadCache
from tests.server.conftest import Api
from tests.tenants_support import customers_ini

SIMULATE = ["--executor", "simulate", "--in", "1h"]
FRESH = {"Cache-Control": "no-cache"}


def _shown(api: Api, path: str, token: str, headers: dict[str, str] | None = None
           ) -> tuple[dict, str | None]:
    reply = api("GET", path, token, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json(), reply.headers.get("age")


def test_an_answer_is_shared_for_at_most_a_second_and_never_past_a_write(api: Api) -> None:
    viewer, operator = api.token("v", "--role", "viewer"), api.token("o", "--role", "operator")
    task = api.cli.submit("command", "-t", "group:web", "-p", "cmd=true", *SIMULATE)
    # Given a task's detail read once
    first, age = _shown(api, f"/tasks/{task}", viewer)
    assert age is None and first["state"] != "paused"
    # When it is paused at the shell (not through this server)
    api.cli.ok("tasks", "pause", str(task))
    # Then the kept answer may still be served, saying its age, for at most a second
    again, age = _shown(api, f"/tasks/{task}", viewer)
    if age is not None:
        assert again == first and int(age) <= 1
    # And a request that says no-cache (as the CLI does) reads the record now
    fresh, age = _shown(api, f"/tasks/{task}", viewer, FRESH)
    assert age is None and fresh["state"] == "paused"
    # And after the second, every caller reads the change
    time.sleep(1.05)
    assert _shown(api, f"/tasks/{task}", viewer)[0]["state"] == "paused"
    # When it is resumed through the server, the next read is the new state at once
    _shown(api, f"/tasks/{task}", viewer)
    assert api("POST", f"/tasks/{task}/resume", operator).status_code == 200
    after, age = _shown(api, f"/tasks/{task}", viewer)
    assert age is None and after["state"] != "paused"
    # And the task list and the job pages are kept the same way
    for path in ("/tasks", f"/tasks/{task}/jobs"):
        _shown(api, path, viewer)
        assert _shown(api, path, viewer)[1] is not None


def test_an_answer_is_never_shared_across_tenants_or_given_to_a_revoked_token(
        tmp_path: Path, api: Api) -> None:
    # Given hosts of two customers, and a task on each customer's hosts
    (tmp_path / "tenants.ini").write_text(customers_ini(acme=["acme-01"], globex=["globex-01"]))
    api.cli.ok("hosts", "import", str(tmp_path / "tenants.ini"))
    acme_task = api.cli.submit("command", "-t", "group:acme", "-p", "cmd=true", *SIMULATE)
    globex_task = api.cli.submit("command", "-t", "group:globex", "-p", "cmd=true", *SIMULATE)
    admin = api.token("a", "--role", "admin")
    acme = api.token("c1", "--role", "customer-viewer", "--tenant", "acme")
    globex = api.token("c2", "--role", "customer-viewer", "--tenant", "globex")
    # When the operator's list is kept, then each customer asks for the same page
    everything = [t["id"] for t in _shown(api, "/tasks", admin)[0]["items"]]
    assert {acme_task, globex_task} <= set(everything)
    for token, own, other in ((acme, acme_task, globex_task), (globex, globex_task, acme_task)):
        ids = [t["id"] for t in _shown(api, "/tasks", token)[0]["items"]]
        # Then each sees its own task only, not the operator's kept page nor the other's
        assert own in ids and other not in ids
        assert api("GET", f"/tasks/{other}", token).status_code == 404
    # And a token revoked while its answer is kept is refused at once
    _shown(api, "/tasks", acme)
    [token_id] = [line.split()[0] for line in api.cli.ok("tokens", "list").splitlines()
                  if " c1 " in f" {line} "]
    api.cli.ok("tokens", "revoke", token_id)
    assert api("GET", "/tasks", acme).status_code == 401


def test_one_request_computes_an_answer_that_many_wait_for() -> None:
    cache, calls = ReadCache(ttl_s=5), []

    def slow() -> dict[str, int]:
        calls.append(1)
        time.sleep(0.3)
        return {"n": len(calls)}

    answers: list[bytes] = []
    threads = [threading.Thread(target=lambda: answers.append(cache.answer(("k",), slow)[0]))
               for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and set(answers) == {b'{"n":1}'}
    # And an answer computed while a write began is not kept
    cache = ReadCache(ttl_s=5)

    def during_a_write() -> dict[str, int]:
        cache.new_generation()
        return {"n": 1}

    cache.answer(("w",), during_a_write)
    assert cache.answer(("w",), lambda: {"n": 2})[0] == b'{"n":2}'
    # And with a time of 0 nothing is kept
    off = ReadCache(ttl_s=0)
    assert [off.answer(("k",), lambda n=n: {"n": n})[1] for n in range(2)] == [None, None]
