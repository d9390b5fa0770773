"""What an operator sees of a running ``fleetsched server`` (the conftest's real process, its
stderr not a terminal): Prometheus metrics at ``/metrics`` by route template and status, and
one JSON access line per request, with the principal and never the token."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.server.conftest import Api

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(api: Api) -> Samples:
    answer = httpx.get(api.base.removesuffix("/api/v1") + "/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text) for s in family.samples}


def labels(method: str, route: str, status: int) -> tuple[tuple[str, str], ...]:
    return (("method", method), ("route", route), ("status", str(status)))


def access_lines(log: Path, wanted: int, timeout: float = 10) -> list[dict[str, Any]]:
    """The access log's JSON lines, once there are ``wanted`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(line) for line in log.read_text().splitlines()
                 if line.startswith("{")]
        found = [line for line in lines if line.get("logger") == "fleetsched.server.access"]
        if len(found) >= wanted or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_metrics_count_requests_by_route_template_and_status_and_refused_tokens(
        api: Api) -> None:
    # Given a viewer's token, and a scrape before anything was asked
    token = api.token("dash", "--role", "viewer")
    before = scrape(api)
    assert before[("fleetsched_server_auth_failures_total", ())] == 0
    assert before[("fleetsched_server_sse_followers", ())] == 0
    assert before[("fleetsched_server_sse_feeds", ())] == 0
    # When it reads two tasks that do not exist, lists tasks, and a bad token is tried twice
    for task_id in (41, 42):
        assert api("GET", f"/tasks/{task_id}", token).status_code == 404
    assert api("GET", "/tasks", token).status_code == 200
    for _ in range(2):
        assert api("GET", "/tasks", "fst_nope_nope").status_code == 401
    assert httpx.get(api.base + "/no/such/path", timeout=30).status_code == 404
    after = scrape(api)
    # Then both detail reads count under the route's template, not their ids
    detail = labels("GET", "/api/v1/tasks/{task_id}", 404)
    assert after[("fleetsched_server_requests_total", detail)] == 2
    assert after[("fleetsched_server_request_duration_seconds_count", detail)] == 2
    assert after[("fleetsched_server_request_duration_seconds_sum", detail)] > 0
    assert after[("fleetsched_server_requests_total", labels("GET", "/api/v1/tasks", 200))] == 1
    assert after[("fleetsched_server_requests_total", labels("GET", "/api/v1/tasks", 401))] == 2
    # And a path no route knows is one series, whatever the path
    assert after[("fleetsched_server_requests_total", labels("GET", "unmatched", 404))] == 1
    assert not [k for k in after if "/api/v1/tasks/41" in str(k) or "no/such" in str(k)]
    # And the refused tokens are counted, the process' own figures served beside
    assert after[("fleetsched_server_auth_failures_total", ())] == 2
    assert after[("process_resident_memory_bytes", ())] > 0


def test_each_request_is_one_json_line_with_its_principal_and_never_its_token(
        api: Api, tmp_path: Path) -> None:
    # Given an operator's token that acts as ci-bot
    token = api.token("ci-deploy", "--role", "operator", "--owner", "ci-bot")
    token_id = api.cli.ok("tokens", "list", "-o", "json")
    # When it lists tasks with a query string, and an unknown token asks too
    assert api("GET", "/tasks?limit=5&state=active", token,
               headers={"Cookie": "session=cookie-secret"}).status_code == 200
    assert api("GET", "/status", "fst_unknown_secretvalue").status_code == 401
    lines = access_lines(tmp_path / "server.log", 2)
    # Then the first is one object with the request's fields and who asked
    ok, refused = lines[-2], lines[-1]
    assert {k: ok[k] for k in ("method", "route", "path", "status", "principal")} == {
        "method": "GET", "route": "/api/v1/tasks", "path": "/api/v1/tasks", "status": 200,
        "principal": "ci-bot"}
    assert ok["via"].startswith("token:") and ok["via"].removeprefix("token:") in token_id
    assert ok["client"] == "127.0.0.1" and 0 < ok["duration_ms"] < 30_000
    assert ok["level"] == "info" and ok["ts"].endswith("+00:00")
    # And the refused one says so, with no principal
    assert (refused["route"], refused["status"]) == ("/api/v1/status", 401)
    assert "principal" not in refused
    # And no line of the log holds a token, a cookie or the query string
    log = (tmp_path / "server.log").read_text()
    for secret in (token, token.split("_", 2)[2], "secretvalue", "cookie-secret",
                   "state=active"):
        assert secret not in log
