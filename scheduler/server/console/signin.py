"""``/ui/login`` and ``/ui/logout``: signing in to the web console and out of it.

Two ways in, both ending in the same session (``scheduler.server.sso``): single sign-on, when
the deployment has an identity provider (the button starts ``/api/v1/auth/login?next=...``,
whose callback comes back to the page asked for), or an API token pasted once (a first try on
the embedded default, where ``fleetsched demo --web`` prints one; ``sso.token_session``). The
token goes in a form posted to this server, never in a URL, and is not kept: the browser holds
a session cookie. The sign-in form has its own CSRF check before any session exists (a random
value in a cookie and the form, which another site can read neither of), so no page elsewhere
can sign a browser in to someone else's session.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from scheduler.errors import UnauthenticatedError
from scheduler.server.auth import stores_of
from scheduler.server.console.web import PREFIX, form, page_headers, render, viewer
from scheduler.server.sso import (
    SESSION_COOKIE,
    clear_session,
    console_page,
    secure_cookies,
    set_session,
)
from scheduler.verbs import sso

__all__ = ["router"]

router = APIRouter()

SIGNIN_COOKIE = "fleetsched_signin"  # the sign-in form's CSRF value


def _next(target: str | None) -> str:
    return console_page(target) or f"{PREFIX}/"


@router.get("/login", include_in_schema=False)
def login_page(request: Request, next: str | None = None) -> Response:
    return _form(request, _next(next))


def _form(request: Request, next_page: str, error: str | None = None,
          status: int = 200) -> Response:
    """The sign-in page, with a new CSRF value in its form and cookie."""
    check = secrets.token_urlsafe(24)
    settings = stores_of(request).settings
    reply = render(request, None, "login.html", next_page=next_page, check=check,
                   sso=bool(settings.oidc_issuer), error=error, status=status,
                   sso_url=f"/api/v1/auth/login?next={quote(next_page, safe='')}")
    reply.set_cookie(SIGNIN_COOKIE, check, max_age=900, path=f"{PREFIX}/login",
                     secure=secure_cookies(request), httponly=True, samesite="strict")
    return reply


@router.post("/login", include_in_schema=False)
async def login_with_token(request: Request) -> Response:
    fields = {k: v[-1] for k, v in parse_qs((await request.body()).decode("utf-8", "replace"),
                                            keep_blank_values=True).items()}
    next_page = _next(fields.get("next"))
    expected = request.cookies.get(SIGNIN_COOKIE, "")
    sent = fields.get("check", "")
    if not expected or not secrets.compare_digest(sent.encode(), expected.encode()):
        return _form(request, next_page, "the sign-in form expired: try again", 400)
    token = fields.get("token", "").strip()
    if not token:
        return _form(request, next_page, "paste an API token (fleetsched tokens create)", 400)
    source = request.client.host if request.client else None
    try:
        session_id, session = sso.token_session(stores_of(request), token, source)
    except UnauthenticatedError:
        request.state.refused = lambda: {"presented": "console sign-in with a token",
                                         "why": "unknown, expired or revoked token"}
        return _form(request, next_page, "that token is unknown, expired or revoked", 401)
    reply = RedirectResponse(next_page, status_code=303, headers=page_headers())
    set_session(request, reply, session_id, session)
    reply.delete_cookie(SIGNIN_COOKIE, path=f"{PREFIX}/login")
    return reply


@router.post("/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    seen = viewer(request)
    await form(request, seen)
    sso.end(stores_of(request), request.cookies[SESSION_COOKIE],
            replace(seen.principal, source=request.client.host if request.client else None))
    reply = RedirectResponse(f"{PREFIX}/login", status_code=303, headers=page_headers())
    clear_session(request, reply)
    return reply
