"""Logins, logouts and failed authentications are audit events on a real ``fleetsched server``:
``login`` and ``logout`` name the person's principal (issuer and subject, role, tenant) and
address; a refused token, session or login callback is an ``auth_fail`` event naming its
address and what was presented (a token's id, never the token), the first of an address's
minute at once and the rest counted into one event after the minute; never a secret.

The first test's server runs under libfaketime (a clock of its own, Debian package
``faketime``, as tests/workers/test_worker_clock.py's node does): its clock starts a second into
a minute, and the test moves it a minute on (wall and monotonic clock alike, as if the minute had
passed) instead of waiting for the wall clock's minutes to end (up to two of them)."""

from __future__ import annotations

import glob
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import Api, copy_record, server_process
from tests.server.test_oidc import (  # noqa: F401 - the fixtures
    SECRET,
    _log_in,
    _person,
    browser,
    issuer,
    oidc_config,
)
from tests.servers import missing
from tests.submit_support import Cli, sql_rows


def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not found:
        missing("libfaketime", "apt-get install faketime")
    return found[0]


@pytest.fixture
def clocked_api(tmp_path: Path, redis_url: str,
                api_record: Path) -> Iterator[tuple[Api, Callable[[], None]]]:
    """``api``'s server with a clock of its own, a second into a minute when it starts, and
    what moves that clock a minute on. The clock is an offset in a file libfaketime reads at
    every reading of the clock (``FAKETIME_NO_CACHE``): the next request after a move sees it."""
    clock = tmp_path / "faketime"
    offset = int(60 - time.time() % 60) + 1  # the server's time: this one plus the offset
    clock.write_text(f"+{offset}\n")
    env = {"LD_PRELOAD": libfaketime(), "FAKETIME_TIMESTAMP_FILE": str(clock),
           "FAKETIME_NO_CACHE": "1"}
    database_url = copy_record(api_record, tmp_path)
    with server_process(tmp_path, redis_url, database_url, env) as (base, proc):
        yield (Api(base, Cli(tmp_path, redis_url, database_url), database_url, proc),
               lambda: clock.write_text(f"+{offset + 60}\n"))


def _events(api: Api, kind: str) -> list[tuple[str | None, dict[str, Any]]]:
    rows = sql_rows(api.database_url, "SELECT operator, data FROM events WHERE kind = :k "
                                      "ORDER BY id", k=kind)
    return [(r.operator, r.data if isinstance(r.data, dict) else json.loads(r.data))
            for r in rows]


def _from(address: str, api: Api, path: str, token: str) -> httpx.Response:
    """A request from another loopback address (each has its own minute of failures)."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(transport=transport, timeout=30) as client:
        return client.get(f"{api.base}{path}", headers={"Authorization": f"Bearer {token}"})


def _everything(api: Api) -> str:
    return repr(sql_rows(api.database_url, "SELECT * FROM events"))


def test_a_refused_token_is_one_event_naming_its_address_and_id_never_the_token(
        clocked_api: tuple[Api, Callable[[], None]]) -> None:
    # (the server's clock started a second into a minute: the failures below fall in it)
    api, next_minute = clocked_api
    # Given a revoked token, and a string that is no token at all
    revoked = api.token("old-ci", "--role", "operator", "--owner", "deploy-bot")
    [(token_id,)] = sql_rows(api.database_url, "SELECT id FROM api_tokens")
    api.cli.ok("tokens", "revoke", str(token_id))
    garbage = "fst_not-a-token-at-all"
    # When each is sent from its own address, the garbage four times
    assert _from("127.0.0.2", api, "/tasks", revoked).status_code == 401
    for _ in range(4):
        assert _from("127.0.0.3", api, "/hosts", garbage).status_code == 401
    # Then each address has one event so far: the revoked token's names it and its owner ...
    first = _events(api, "auth_fail")
    assert len(first) == 2, first
    by_source = {data["principal"]["source"]: (operator, data) for operator, data in first}
    operator, data = by_source["127.0.0.2"]
    assert operator == "deploy-bot"
    assert data["principal"] == {"via": f"token:{token_id}", "role": "operator", "tenant": None,
                                 "source": "127.0.0.2"}
    assert (data["presented"], data["why"], data["token_id"], data["count"]) == (
        "bearer token", "revoked", token_id, 1)
    assert (data["method"], data["path"]) == ("GET", "/api/v1/tasks")
    # ... the garbage's, that it was malformed and nobody's
    operator, data = by_source["127.0.0.3"]
    assert operator is None and data["principal"]["via"] is None
    assert (data["why"], data["count"], data["path"]) == ("malformed", 1, "/api/v1/hosts")
    # And once the minute is over, the next request the server serves records the other three
    next_minute()
    assert api("GET", "/openapi.json").status_code == 200
    later = _events(api, "auth_fail")[2:]
    assert [(d["principal"]["source"], d["count"]) for _o, d in later] == [("127.0.0.3", 3)]
    # Never a token or its secret in the record
    everything = _everything(api)
    assert revoked not in everything and revoked.split("_", 2)[2] not in everything
    assert garbage not in everything


def test_a_login_and_a_logout_are_events_of_the_persons_principal(
        oidc_config: str, api: Api, browser: httpx.Client) -> None:  # noqa: F811
    issuer = oidc_config  # noqa: F811
    _person(issuer, "u-7001", preferred_username="gina", groups=["fleet-viewers"])
    # When gina logs in and out
    reply, callback = _log_in(browser, api, "u-7001")
    assert reply.status_code == 200, reply.text
    session_id = browser.cookies["fleetsched_session"]
    assert browser.post(f"{api.base}/auth/logout",
                        headers={"X-CSRF-Token": reply.json()["csrf_token"]}).status_code == 204
    # Then each is one event naming her, her issuer and subject, role and address
    principal = {"via": f"oidc:{issuer}#u-7001", "role": "viewer", "tenant": None,
                 "source": "127.0.0.1"}
    [(operator, login)] = _events(api, "login")
    assert operator == "gina" and login["principal"] == principal
    [(operator, logout)] = _events(api, "logout")
    assert operator == "gina" and logout["principal"] == principal
    # When the same callback is presented again: a failed login, recorded as one
    assert browser.get(callback).status_code == 401
    failed = [d for _o, d in _events(api, "auth_fail")
              if d.get("presented") == "single sign-on callback"]
    assert len(failed) == 1 and "unknown, expired or already used" in failed[0]["why"]
    assert failed[0]["path"] == "/api/v1/auth/callback"
    # And no event holds the session id, the login's code or state, or the client secret
    everything = _everything(api)
    query = callback.split("?", 1)[1]
    assert session_id not in everything and SECRET not in everything
    assert all(value not in everything for part in query.split("&")
               for value in [part.split("=", 1)[1]])
