"""Single sign-on against a real OpenID Connect provider process (``oidc-provider-mock``):
the whole authorization code flow driven with ``httpx`` (the server's redirect, the provider's
login form, the callback), then the API called with the session cookie; CSRF on cookie writes;
logout; refused logins (no mapped group, a replayed or foreign callback); and the ID token's
checks (signature, audience, expiry, nonce, algorithm) on tokens the provider really issued.

The login tests share one server configured for the module's provider (``sso_api``, on
``tests.server.conftest.shared_api``): each logs in a person of its own in a browser of its
own, and judges the record against what it held when it began."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from scheduler.access import oidc
from scheduler.config import Settings
from scheduler.errors import UnauthenticatedError
from tests.server.conftest import Api, shared_api
from tests.servers import free_port, wait_for_port
from tests.submit_support import events, sql_rows

pytestmark = pytest.mark.xdist_group("server-oidc")  # under -n: one process, one server

CLIENT_ID = "fleetsched"
SECRET = "s3cret-of-the-client-0123456789"


def _start_provider(*options: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "oidc_provider_mock", "--port", str(port),
                             *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port("127.0.0.1", port, timeout=30)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    proc, url = _start_provider()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _write_config(tmp: Path, issuer: str) -> None:
    """The server's config file in ``tmp`` (before the server starts): the issuer, the client
    secret as an @file: reference, and the group -> role mapping."""
    (tmp / "client-secret").write_text(SECRET + "\n")
    config = tmp / "config" / "fleetsched" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'oidc_issuer = "{issuer}"\noidc_client_id = "{CLIENT_ID}"\n'
        f'oidc_client_secret = "@file:{tmp / "client-secret"}"\n'
        '[oidc_roles]\n"fleet-operators" = "operator"\n"fleet-viewers" = "viewer"\n')


@pytest.fixture
def oidc_config(tmp_path: Path, issuer: str) -> str:
    """The config of ``api``'s server (written before ``api`` starts it), for the module's
    provider (tests/server/test_auth_events.py)."""
    _write_config(tmp_path, issuer)
    return issuer


@pytest.fixture(scope="module")
def sso_server(tmp_path_factory: pytest.TempPathFactory, issuer: str,
               api_record: Path) -> Iterator[tuple[Api, Path]]:
    """The module's server, configured for ``issuer``, and its log."""
    tmp = tmp_path_factory.mktemp("sso")
    _write_config(tmp, issuer)
    with shared_api(tmp, api_record) as server:
        yield server, tmp / "server.log"


@pytest.fixture
def sso_api(sso_server: tuple[Api, Path]) -> Api:
    return sso_server[0]


def _person(issuer: str, sub: str, **claims: object) -> None:
    reply = httpx.put(f"{issuer}/users/{quote(sub)}", json=claims, timeout=10)
    assert reply.status_code == 204, reply.text


def _to_provider(browser: httpx.Client, api: Api) -> httpx.Response:
    """The browser asks the server to log in and is sent to the provider's login form."""
    reply = browser.get(f"{api.base}/auth/login")
    assert reply.status_code == 302, reply.text
    return reply


def _log_in(browser: httpx.Client, api: Api, sub: str) -> tuple[httpx.Response, str]:
    """The whole flow in one browser: login, the provider's form, the callback. Returns the
    callback's answer and its URL."""
    authorize = _to_provider(browser, api).headers["location"]
    assert browser.get(authorize).status_code == 200  # the provider's login form
    back = browser.post(authorize, data={"sub": sub})
    assert back.status_code == 302, back.text
    callback = back.headers["location"]
    return browser.get(callback), callback


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30, follow_redirects=False) as client:
        yield client


def test_a_person_logs_in_at_the_provider_and_uses_the_api_with_the_session_cookie(
        issuer: str, sso_server: tuple[Api, Path], browser: httpx.Client) -> None:
    api, log_path = sso_server
    _person(issuer, "u-1001", preferred_username="alice", email="alice@example.com",
            groups=["staff", "fleet-operators"])
    # When alice logs in, the server sends her browser to the provider with PKCE S256
    authorize = urlsplit(_to_provider(browser, api).headers["location"])
    query = parse_qs(authorize.query)
    assert f"{authorize.scheme}://{authorize.netloc}" == issuer
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["client_id"] == [CLIENT_ID] and query["state"] and query["nonce"]
    assert "code_verifier" not in query
    browser.cookies.clear()
    reply, _callback = _log_in(browser, api, "u-1001")
    # Then the callback names her principal: her username, the issuer and subject, her role
    assert reply.status_code == 200, reply.text
    who = reply.json()
    assert (who["name"], who["via"], who["role"]) == ("alice", f"oidc:{issuer}#u-1001",
                                                      "operator")
    # And the session cookie is HttpOnly, SameSite=Lax, for the API and the console (not Secure on
    # loopback)
    cookies = reply.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("fleetsched_session="))
    assert "HttpOnly" in session and "SameSite=lax" in session and "Path=/;" in session
    assert "Secure" not in session
    csrf = next(c for c in cookies if c.startswith("fleetsched_csrf="))
    assert "HttpOnly" not in csrf and who["csrf_token"] in csrf
    # When she reads and writes with the cookie (and the CSRF token on the write)
    assert browser.get(f"{api.base}/tasks").status_code == 200
    submitted = browser.post(f"{api.base}/tasks", headers={"X-CSRF-Token": who["csrf_token"]},
                             json={"action": "command", "target": "web-01",
                                   "params": {"cmd": "true"}, "executor": "simulate",
                                   "in": "1h"})
    # Then the task is recorded as hers
    assert submitted.status_code == 201, submitted.text
    assert sql_rows(api.database_url, "SELECT operator FROM tasks WHERE id = :id",
                    id=submitted.json()["task_id"]) == [("alice",)]
    (submit,) = events(api.database_url, submitted.json()["task_id"], {"submit"})
    data = submit.data if isinstance(submit.data, dict) else json.loads(submit.data)
    assert submit.operator == "alice"
    assert data["principal"]["via"] == f"oidc:{issuer}#u-1001"
    assert data["principal"]["role"] == "operator"
    # And the server's log has neither the client secret nor her session id
    log = log_path.read_text()
    assert SECRET not in log and browser.cookies["fleetsched_session"] not in log


def test_a_write_with_the_session_cookie_needs_the_sessions_csrf_token(
        issuer: str, sso_api: Api, browser: httpx.Client) -> None:
    api = sso_api
    _person(issuer, "u-1002", preferred_username="bob", groups=["fleet-operators"])
    tasks = sql_rows(api.database_url, "SELECT id FROM tasks")
    reply, _ = _log_in(browser, api, "u-1002")
    assert reply.status_code == 200
    task = {"action": "command", "target": "web-01", "params": {"cmd": "true"},
            "executor": "simulate", "in": "1h"}
    # Given a write with the cookie but no CSRF header, or another value (a forged page's)
    for headers in ({}, {"X-CSRF-Token": "guessed"}):
        refused = browser.post(f"{api.base}/tasks", headers=headers, json=task)
        # Then it is refused before any verb runs, with one line
        assert refused.status_code == 403, refused.text
        assert "X-CSRF-Token" in refused.json()["error"]["message"]
    assert sql_rows(api.database_url, "SELECT id FROM tasks") == tasks
    # While a bearer token needs no CSRF token: a browser never adds one on its own
    token = api.token("ci", "--role", "operator")
    assert api("POST", "/tasks", token, json=task).status_code == 201


def test_a_person_without_a_mapped_group_is_refused_at_login_with_one_line(
        issuer: str, sso_api: Api, browser: httpx.Client) -> None:
    api = sso_api
    _person(issuer, "u-1003", email="carol@example.com", groups=["marketing"])
    reply, _ = _log_in(browser, api, "u-1003")
    assert reply.status_code == 403
    message = reply.json()["error"]["message"]
    assert message == ("carol@example.com has no fleetsched role: no value of the 'groups' "
                       "claim is in oidc_roles")
    assert "fleetsched_session" not in browser.cookies
    assert browser.get(f"{api.base}/tasks").status_code == 401


def test_a_replayed_or_foreign_callback_is_refused(
        issuer: str, sso_api: Api, browser: httpx.Client) -> None:
    api = sso_api
    _person(issuer, "u-1004", preferred_username="dave", groups=["fleet-viewers"])
    reply, callback = _log_in(browser, api, "u-1004")
    assert reply.status_code == 200
    # When the same callback (state and code) is presented again, by the same browser
    browser.cookies.set("fleetsched_login", parse_qs(urlsplit(callback).query)["state"][0])
    again = browser.get(callback)
    # Then the state is spent: 401
    assert again.status_code == 401
    assert again.json()["error"]["message"] == "this login is unknown, expired or already used"
    # When an attacker sends a victim's browser the callback of a login the attacker started
    with httpx.Client(timeout=30, follow_redirects=False) as attacker:
        authorize = _to_provider(attacker, api).headers["location"]
        lure = attacker.post(authorize, data={"sub": "u-1004"}).headers["location"]
    with httpx.Client(timeout=30, follow_redirects=False) as victim:
        # Then the victim's browser, which never started that login, is not logged in
        assert victim.get(lure).status_code == 401
        assert "fleetsched_session" not in victim.cookies
    # And a callback with the provider's error is one line naming it
    denied = browser.get(f"{api.base}/auth/callback?error=access_denied&state=x")
    assert denied.status_code == 401 and "access_denied" in denied.json()["error"]["message"]


def test_logout_ends_the_session_for_every_later_request(
        issuer: str, sso_api: Api, browser: httpx.Client) -> None:
    api = sso_api
    _person(issuer, "u-1005", preferred_username="erin", groups=["fleet-viewers"])
    reply, _ = _log_in(browser, api, "u-1005")
    csrf = reply.json()["csrf_token"]
    session_id = browser.cookies["fleetsched_session"]
    assert browser.get(f"{api.base}/auth/session").json()["name"] == "erin"
    # Logout is a write: without the CSRF token it is refused and the session lives on
    assert browser.post(f"{api.base}/auth/logout").status_code == 403
    assert browser.get(f"{api.base}/hosts").status_code == 200
    assert browser.post(f"{api.base}/auth/logout",
                        headers={"X-CSRF-Token": csrf}).status_code == 204
    # Then the old session id is refused even when sent again by hand
    with httpx.Client(timeout=30, cookies={"fleetsched_session": session_id}) as replay:
        gone = replay.get(f"{api.base}/hosts")
    assert gone.status_code == 401
    assert gone.json()["error"]["message"] == "the session is unknown, ended or expired"


# The ID token's checks, on tokens the provider really issued -----------------------------


def _id_token(issuer: str, sub: str, client_id: str = CLIENT_ID, nonce: str = "n-1") -> str:
    """An ID token of the provider for ``sub``, by the code flow done by hand."""
    redirect = "http://127.0.0.1:9/callback"
    params = {"client_id": client_id, "redirect_uri": redirect, "response_type": "code",
              "scope": "openid profile", "nonce": nonce, "state": "s"}
    back = httpx.post(f"{issuer}/oauth2/authorize", params=params, data={"sub": sub},
                      timeout=10)
    code = parse_qs(urlsplit(back.headers["location"]).query)["code"][0]
    token = httpx.post(f"{issuer}/oauth2/token", auth=(client_id, SECRET), timeout=10, data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect})
    return str(token.json()["id_token"])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _verify(issuer: str, token: str, nonce: str = "n-1", leeway: float = 30) -> object:
    settings = Settings(oidc_issuer=issuer, oidc_client_id=CLIENT_ID)
    return oidc.verify_id_token(settings, oidc.provider(settings), token, nonce, leeway=leeway)


def test_an_id_token_is_refused_unless_signed_by_the_issuer_for_this_client_and_login(
        issuer: str) -> None:
    _person(issuer, "u-2001", preferred_username="frank", groups=["fleet-operators"])
    good = _id_token(issuer, "u-2001")
    assert _verify(issuer, good)["sub"] == "u-2001"  # type: ignore[index]
    header, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    forged_claims = _b64(json.dumps({**claims, "sub": "admin"}).encode())
    unsigned = _b64(json.dumps({"alg": "none", "typ": "JWT",
                                "kid": json.loads(base64.urlsafe_b64decode(header + "=="))
                                .get("kid")}).encode())
    refused = {
        "a changed claim under the old signature": f"{header}.{forged_claims}.{signature}",
        "no signature (alg none)": f"{unsigned}.{payload}.",
        "another client's token": _id_token(issuer, "u-2001", client_id="someone-else"),
        "garbage": "not.a.token",
    }
    for why, token in refused.items():
        with pytest.raises(UnauthenticatedError):
            _verify(issuer, token)
            pytest.fail(why)
    # And a real token of another login (its nonce) is refused for this one
    with pytest.raises(UnauthenticatedError):
        _verify(issuer, good, nonce="n-2")


def test_an_expired_id_token_is_refused() -> None:
    proc, short_lived = _start_provider("--token-max-age", "1")
    try:
        token = _id_token(short_lived, "u-3001")
        time.sleep(2.1)
        # Then it is refused for its expiry alone: with an hour of leeway it would pass
        assert _verify(short_lived, token, leeway=3600)
        with pytest.raises(UnauthenticatedError):
            _verify(short_lived, token, leeway=0)
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture
def unreachable_issuer(tmp_path: Path) -> str:
    """A config naming an issuer on a port where nothing listens (written before ``api``)."""
    issuer = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "config" / "fleetsched" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'oidc_issuer = "{issuer}"\noidc_client_id = "{CLIENT_ID}"\n'
                      '[oidc_roles]\n"fleet-operators" = "operator"\n')
    return issuer


def test_an_unreachable_issuer_is_a_502_in_one_line(unreachable_issuer: str, api: Api,
                                                    browser: httpx.Client) -> None:
    reply = browser.get(f"{api.base}/auth/login")
    assert reply.status_code == 502
    message = reply.json()["error"]["message"]
    assert message.startswith("the identity provider's ") and "cannot be read" in message
    assert "fleetsched_login" not in browser.cookies


def test_login_on_a_server_without_single_sign_on_says_so(api: Api,
                                                         browser: httpx.Client) -> None:
    reply = browser.get(f"{api.base}/auth/login")
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == "single sign-on is not configured on this server"
    assert browser.get(f"{api.base}/auth/session").status_code == 401
