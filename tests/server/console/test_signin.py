"""Signing in to the web console (``scheduler.server.console.signin``) on a real server: with a
token through the form, refused without a session, with a wrong token or without the form's
CSRF value; signing out; a session opened with a token ends when the token is revoked. The
tests share the module's server (tests/server/console/conftest.py), each with tokens of its own,
and judge the events written while they ran."""

from __future__ import annotations

import re

import httpx

from tests.server.console.conftest import Console
from tests.submit_support import sql_rows


def test_a_page_without_a_session_sends_the_browser_to_sign_in_and_back(
        console: Console) -> None:
    # When a browser without a session asks for a page
    reply = httpx.get(f"{console.root}/ui/?state=failed", follow_redirects=False)
    # Then it is sent to the sign-in page, which will send it back to that page
    assert reply.status_code == 303
    assert reply.headers["location"] == "/ui/login?next=%2Fui%2F%3Fstate%3Dfailed"
    # And / is the console's
    assert httpx.get(f"{console.root}/").headers["location"] == "/ui/"


def _events(console: Console, kind: str) -> list[object]:
    return sql_rows(console.api.database_url,
                    "SELECT id, operator, data FROM events WHERE kind = :kind", kind=kind)


def test_a_token_signs_in_and_the_session_is_recorded_as_a_login(console: Console) -> None:
    before = _events(console, "login")
    browsing = console.as_role("operator", owner="olga")
    # Then the fleet page is hers, with the pages an operator may see and a sign-out button
    page = browsing.get("/ui/")
    assert page.status_code == 200, page.text[:300]
    assert "olga · operator" in page.text
    assert 'href="/ui/submit"' in page.text and 'href="/ui/audit"' in page.text
    # And it is sent with a policy that loads nothing from elsewhere and runs no inline script
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    # And the session cookie is HttpOnly; the token is in no cookie
    cookies = " ".join(browsing.client.cookies.values())
    assert "fst_" not in cookies
    # And the sign-in is a login event naming her token
    (login,) = [event for event in _events(console, "login") if event not in before]
    assert login.operator == "olga" and '"with": "token"' in login.data


def test_a_wrong_token_is_refused_with_one_line_and_recorded(console: Console) -> None:
    before = _events(console, "auth_fail")
    with httpx.Client(follow_redirects=False) as client:
        reply = _post_token(client, console.root, "fst_nope_nope")
    assert reply.status_code == 401
    assert "that token is unknown, expired or revoked" in reply.text
    assert "fleetsched_session" not in reply.headers.get("set-cookie", "")
    assert len([event for event in _events(console, "auth_fail") if event not in before]) == 1


def _post_token(client: httpx.Client, root: str, token: str,
                next_page: str = "/ui/") -> httpx.Response:
    page = client.get(f"{root}/ui/login", params={"next": next_page})
    check = re.search(r'name="check" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    return client.post(f"{root}/ui/login", data={"check": check, "next": next_page,
                                                  "token": token})


def test_the_sign_in_form_needs_its_own_csrf_value(console: Console) -> None:
    token = console.token("t", "--role", "viewer")
    # When a page elsewhere posts a token to the sign-in form (it cannot read its value)
    reply = httpx.post(f"{console.root}/ui/login", data={"token": token, "next": "/ui/"},
                       follow_redirects=False)
    # Then no session is opened
    assert reply.status_code == 400 and "expired" in reply.text
    assert "fleetsched_session" not in reply.headers.get("set-cookie", "")


def test_a_next_page_off_the_console_is_not_followed(console: Console) -> None:
    token = console.token("t", "--role", "viewer")
    for target in ("https://evil.example/ui/", "//evil.example/ui/", "/ui//evil.example",
                   "/api/v1/tokens", "/ui\\evil.example"):
        with httpx.Client(follow_redirects=False) as client:
            reply = _post_token(client, console.root, token, target)
        assert reply.headers["location"] == "/ui/", target


def test_sign_out_needs_the_csrf_token_and_ends_the_session(console: Console) -> None:
    browsing = console.as_role("viewer")
    # When a form without the CSRF token posts the sign-out
    assert browsing.post("/ui/logout", csrf=False).status_code == 403
    assert browsing.get("/ui/").status_code == 200
    # When the viewer signs out
    reply = browsing.post("/ui/logout")
    assert reply.status_code == 303 and reply.headers["location"] == "/ui/login"
    # Then the session is gone for good, even for a copy of its cookie
    assert browsing.get("/ui/").status_code == 303


def test_a_session_opened_with_a_token_ends_when_the_token_is_revoked(console: Console) -> None:
    token = console.token("short", "--role", "viewer")
    browsing = console.signed(token)
    assert browsing.get("/ui/").status_code == 200
    token_id = token.split("_")[1]
    listed = console.api.cli.ok("tokens", "list")
    number = next(line.split()[0] for line in listed.splitlines() if token_id in line)
    console.api.cli.ok("tokens", "revoke", number)
    assert browsing.get("/ui/").status_code == 303
