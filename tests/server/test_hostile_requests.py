"""Hostile requests to a real ``fleetsched server`` (issue 28 section 5): ids of objects that do
not exist and foreign tenants, path traversal in names, oversize bodies, malformed JSON, a huge
``limit``, a token replayed after its revocation, CR/LF in headers, very long tokens, and a
burst of failed authentications. Each gets a clean error (JSON with one line where the server
answers at all, never a stack trace or a 500), and every table of the record is the same
afterwards, but for the ``auth_fail`` events that record the failed authentications (at most
one per address and minute at once: tests/server/test_auth_events.py).

The tests share one server (the module's, ``tests.server.conftest.shared_api``): each judges
the record against what it was when the test began, with tokens of its own names; the burst of
failed authentications comes from an address of its own (127.0.0.7), since the others' 401s
from 127.0.0.1 count in that address's minute. The PostgreSQL test starts its own."""

from __future__ import annotations

import itertools
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import sqlalchemy as sa

from tests.server.conftest import Api, serve_api, shared_api

pytestmark = pytest.mark.xdist_group("server-hostile")  # under -n: one process, one server

TASK = {"action": "command", "target": "web-01", "params": {"cmd": "true"},
        "executor": "simulate", "in": "1h"}
NAMES = itertools.count(1)  # tokens' names: each test's its own on the one server
BURST_FROM = "127.0.0.7"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory,
           api_record: Path) -> Iterator[tuple[Api, Path]]:
    """The module's server and its log."""
    tmp = tmp_path_factory.mktemp("hostile")
    with shared_api(tmp, api_record) as server:
        yield server, tmp / "server.log"


@pytest.fixture
def api(served: tuple[Api, Path]) -> Api:
    return served[0]


def _record(database_url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of the record (but the ``auth_fail`` events)."""
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            return {table: sorted((tuple(row) for row in conn.execute(sa.text(
                        f'SELECT * FROM "{table}"' if table != "events"
                        else "SELECT * FROM events WHERE kind != 'auth_fail'"))), key=repr)
                    for table in sa.inspect(engine).get_table_names()}
    finally:
        engine.dispose()


@pytest.fixture
def admin(api: Api) -> Iterator[str]:
    """An administrator's token (every verb is allowed, so a refusal is about the request),
    used once so its last-used time is written before the snapshot;
    the record must be the same after the test as before its hostile requests."""
    token = api.token(f"ci-{next(NAMES)}", "--role", "admin")
    assert api("GET", "/hosts", token).status_code == 200
    before = _record(api.database_url)
    yield token
    assert _record(api.database_url) == before


def _clean(reply: httpx.Response, *statuses: int) -> dict[str, object]:
    """The reply is one of ``statuses`` with a JSON error of one line, and no trace of Python."""
    assert reply.status_code in statuses, (reply.status_code, reply.text)
    error = reply.json()["error"]
    assert isinstance(error["message"], str) and "\n" not in error["message"]
    assert "Traceback" not in reply.text and 'File "' not in reply.text
    return error  # type: ignore[no-any-return]


def _raw(api: Api, request: bytes) -> bytes:
    """Send ``request`` as bytes (httpx refuses to send CR or LF inside a header); the answer,
    read to the end of its body (its ``Content-Length``, else until the server closes: a
    connection kept alive would otherwise hold the read for the server's keep-alive time)."""
    where = urlsplit(api.base)
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := conn.recv(65536)):
            answer += chunk
        head, ended, body = answer.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)\r?$", head)
        while ended and (length is None or len(body) < int(length[1])) and (
                chunk := conn.recv(65536)):
            body += chunk
    return head + ended + body


def test_every_answer_carries_the_security_headers(api: Api, admin: str) -> None:
    for method, path, token in (("GET", "/hosts", admin), ("GET", "/hosts", None),
                                ("GET", "/no-such-route", admin),
                                ("GET", "/openapi.json", None)):
        reply = api(method, path, token)
        assert reply.headers["x-content-type-options"] == "nosniff", path
        assert reply.headers["x-frame-options"] == "DENY"
        assert reply.headers["referrer-policy"] == "no-referrer"
        assert reply.headers["content-security-policy"] == ("default-src 'none'; "
                                                            "frame-ancestors 'none'")
        assert reply.headers["cache-control"] == "no-store"


@pytest.fixture
def ghost(api: Api) -> str:
    """A customer's token, of a tenant that owns no host (used once, like ``admin``)."""
    token = api.token(f"ghost-{next(NAMES)}", "--role", "customer-viewer", "--tenant", "ghost")
    api("GET", "/hosts/no-such", token)
    return token


def test_objects_that_do_not_exist_and_foreign_tenants_get_404_or_403(
        api: Api, ghost: str, admin: str) -> None:
    for method, path in (("GET", "/tasks/999999"), ("GET", "/jobs/999999-web-01"),
                         ("POST", "/tasks/999999/cancel"), ("POST", "/tasks/999999/pause"),
                         ("GET", "/hosts/no-such-host"), ("GET", "/windows/no-such-window"),
                         ("POST", "/schedules/no-such-schedule/pause")):
        _clean(api(method, path, admin), 404)
    huge = "99999999999999999999999"  # past 64 bits: SQLite cannot bind it (was a 500)
    for path in ("/tasks/-1", "/tasks/1e9999", f"/tasks/{huge}", f"/tasks/{huge}/jobs",
                 f"/tasks/{huge}/events", f"/tasks/{huge}/output?host=web-01"):
        _clean(api("GET", path, admin), 404, 422)
    _clean(api("POST", f"/tasks/{huge}/cancel", admin), 404, 422)
    # A customer of a tenant that owns nothing learns nothing of the fleet's hosts: asking for
    # one is answered exactly as asking for a host that does not exist
    foreign, missing = api("GET", "/hosts/web-01", ghost), api("GET", "/hosts/no-such", ghost)
    assert foreign.status_code == missing.status_code and foreign.status_code in (403, 404)
    assert (_clean(foreign, 403, 404)["message"].replace("web-01", "X")
            == _clean(missing, 403, 404)["message"].replace("no-such", "X"))


@pytest.mark.parametrize("name", [
    "../../etc/passwd", "..%2f..%2fetc%2fpasswd", "%2e%2e%2f%2e%2e%2fetc", "web-01%00",
    "..%5c..%5cwindows", "%252e%252e%252f", "web-01%0d%0aSet-Cookie:%20x=y"],
    ids=["dots", "encoded-slash", "encoded-dots", "nul", "backslash", "double-encoded", "crlf"])
def test_path_traversal_in_names_is_a_clean_not_found(api: Api, admin: str,
                                                      name: str) -> None:
    for method, path in (("GET", f"/hosts/{name}"), ("GET", f"/hosts/{name}/history"),
                         ("GET", f"/windows/{name}"), ("POST", f"/schedules/{name}/pause")):
        reply = httpx.request(method, f"{api.base}{path}", timeout=30,
                              headers={"Authorization": f"Bearer {admin}"})
        _clean(reply, 404, 400, 422)
        assert "set-cookie" not in reply.headers
    reply = api("POST", f"/windows/{name}/assign", admin, json={"hosts": ["web-01"]})
    _clean(reply, 404, 400, 403, 422)


def test_an_oversize_body_is_refused_413_before_it_is_parsed(api: Api, admin: str) -> None:
    big = json.dumps({**TASK, "params": {"cmd": "x" * (2 * 1024 * 1024)}}).encode()
    headers = {"Content-Type": "application/json"}
    # Announced by its Content-Length
    error = _clean(api("POST", "/tasks", admin, content=big, headers=headers), 413)
    assert error["message"] == "the request body is over 1048576 bytes"
    # And streamed without one (chunked): refused once the bytes read pass the limit
    chunks = (big[i:i + 65536] for i in range(0, len(big), 65536))
    reply = api("POST", "/tasks", admin, content=chunks, headers=headers)
    _clean(reply, 413)
    assert reply.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("body", [
    b"{not json", b'{"action": "command", "target": ', b"\xff\xfe\x00garbage", b"",
    b"[1, 2, 3]", b'"just a string"', b"[" * 200_000 + b"]" * 200_000,
    b'{"action": "command", "target": "web-01", "target": "web-02", "params": {"cmd": 1}}'],
    ids=["unclosed", "cut", "not-utf8", "empty", "a-list", "a-string", "nested-200k-deep",
         "wrong-types"])
def test_malformed_json_gets_one_line_and_changes_nothing(api: Api, admin: str,
                                                          body: bytes) -> None:
    reply = api("POST", "/tasks", admin, content=body,
                headers={"Content-Type": "application/json"})
    _clean(reply, 400, 422)


def test_a_huge_limit_or_offset_is_refused_not_served(api: Api, admin: str) -> None:
    for query in ("limit=1000000000", "limit=99999999999999999999999999", "limit=-1",
                  "limit=0", "offset=-5", "limit=abc"):
        for path in ("/tasks", "/hosts"):
            error = _clean(api("GET", f"{path}?{query}", admin), 422)
            assert error["message"].startswith("query.")
    assert api("GET", "/hosts?limit=1000", admin).status_code == 200


def test_a_token_replayed_after_its_revocation_is_refused_at_once(api: Api) -> None:
    name = f"leaky-{next(NAMES)}"
    token = api.token(name, "--role", "operator")
    assert api("GET", "/tasks", token).status_code == 200
    token_id = next(row["id"] for row in json.loads(api.cli.ok("tokens", "list", "-o", "json"))
                    if row["name"] == name)
    api.cli.ok("tokens", "revoke", str(token_id), operator="admin-at-shell")
    before = _record(api.database_url)
    for method, path, body in (("GET", "/tasks", None), ("POST", "/tasks", TASK),
                               ("GET", "/hosts/web-01", None)):
        _clean(api(method, path, token, json=body), 401)
    assert _record(api.database_url) == before


def test_cr_or_lf_inside_a_header_is_refused_by_the_server(api: Api, admin: str) -> None:
    port = urlsplit(api.base).port
    for header in (b"Authorization: Bearer " + admin.encode() + b"\rX-Injected: 1",
                   b"X-CSRF-Token: a\nb", b"Authorization: Bearer a\x00b"):
        answer = _raw(api, b"GET /api/v1/hosts HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n"
                      b"Connection: close\r\n\r\n" % (port, header))
        status = answer.split(b"\r\n", 1)[0]
        assert status.startswith(b"HTTP/1.1 400"), answer[:200]
        assert b"Traceback" not in answer and b"web-01" not in answer
    assert api("GET", "/hosts", admin).status_code == 200  # and the server is fine


def test_very_long_tokens_are_refused_cleanly(api: Api, admin: str) -> None:
    for token in ("fst_" + "a" * 12 + "_" + "b" * 8000, "x" * 12_000, admin * 100):
        _clean(api("GET", "/hosts", token), 401)
    # Past the HTTP layer's limit on a request's head (h11: 16 KiB) the answer is its 400
    port = urlsplit(api.base).port
    answer = _raw(api, b"GET /api/v1/hosts HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                  b"Authorization: Bearer %s\r\n\r\n" % (port, b"y" * 20_000))
    assert answer.split(b"\r\n", 1)[0].startswith(b"HTTP/1.1 4"), answer[:200]
    assert b"Traceback" not in answer
    assert api("GET", "/hosts", admin).status_code == 200


def _from(address: str, api: Api, token: str) -> httpx.Response:
    """``GET /tasks`` with ``token`` from another loopback address."""
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address),
                      timeout=30) as client:
        return client.get(f"{api.base}/tasks", headers={"Authorization": f"Bearer {token}"})


def test_failed_authentications_are_limited_per_address_and_logged_without_the_token(
        api: Api, admin: str, served: tuple[Api, Path]) -> None:
    # Given 20 requests with bad tokens in a minute from one address, each a plain 401
    for n in range(20):
        _clean(_from(BURST_FROM, api, f"fst_0123456789ab_guess{n:04}guessguessguessguess"), 401)
    # Then the next request from the address, even with a valid token, waits: 429
    reply = _from(BURST_FROM, api, admin)
    error = _clean(reply, 429)
    assert error["message"] == "too many failed authentications from this address"
    assert 1 <= int(reply.headers["retry-after"]) <= 60
    # While another address is served
    assert api("GET", "/tasks", admin).status_code == 200
    # And the log names the address and the path of each failure, never the token
    log = served[1].read_text()
    assert log.count(f"authentication refused from {BURST_FROM}: GET '/api/v1/tasks'") == 20
    assert "guess" not in log and admin not in log
    # And the record has one auth_fail event of the burst so far, the rest counted for after
    # the minute (when a minute ends within the burst: also that minute's count and the next
    # minute's first, three); nor does it hold a token
    engine = sa.create_engine(api.database_url)
    try:
        with engine.connect() as conn:
            events = conn.execute(sa.text(
                "SELECT data FROM events WHERE kind = 'auth_fail'")).scalars().all()
    finally:
        engine.dispose()
    assert all("guess" not in str(e) for e in events)
    burst = [e for e in events if BURST_FROM in str(e)]
    assert 1 <= len(burst) <= 3, burst


def test_a_nul_character_in_an_address_is_a_clean_400_on_postgresql(
        tmp_path: Path, redis_url: str, fresh_postgres_url: str) -> None:
    # PostgreSQL takes no NUL in a text: without the check these were 500s
    with serve_api(tmp_path, redis_url, fresh_postgres_url) as api:
        admin = api.token("admin", "--role", "admin")
        before = _record(api.database_url)
        for path in ("/tasks?operator=a%00b", "/hosts?match=a%00b", "/hosts/a%00b",
                     "/windows/w%00x", "/tasks?state=%00"):
            reply = api("GET", path, admin)
            assert reply.status_code == 400, (path, reply.text)
            assert reply.json()["error"]["message"] == "the address holds a NUL character"
        assert _record(api.database_url) == before
        assert "Traceback" not in (tmp_path / "server.log").read_text()
