"""``/api/v1/auth``: single sign-on for people (OpenID Connect, docs/guides/sso.md), and the
principal of a request that carries a session cookie instead of a bearer token.

1. ``GET /auth/login`` sends the browser to the issuer (state, nonce, PKCE S256) and gives it
   a short ``fleetsched_login`` cookie holding the state, so the callback comes back to the
   browser that started the login.
2. ``GET /auth/callback`` finishes the login (``scheduler.verbs.sso``) and sets two cookies:
   ``fleetsched_session`` (the opaque session id; ``HttpOnly``, ``SameSite=Lax``, ``Path=/``:
   the API and the web console's pages) and ``fleetsched_csrf`` (readable by a page's script,
   which echoes it in an ``X-CSRF-Token`` header on every write; the console's forms carry it
   as a field). A login started with ``?next=/ui/...`` (the console's sign-in) ends with a
   redirect there; otherwise the callback answers the session as JSON.
3. ``cookie_principal``: a request with no ``Authorization`` header and a session cookie is
   that session's principal; a write (anything but GET, HEAD, OPTIONS) must echo the
   session's CSRF token, or it is refused before any verb runs. Bearer tokens need no CSRF
   token: a browser never adds them on its own.
4. ``POST /auth/logout`` ends the session for every server process and clears the cookies.
5. A login and a logout are audit events (``scheduler.verbs.sso``); a callback that fails
   leaves what it was in the request's state (``refused``), for its ``auth_fail`` event
   (``scheduler.server.hardening``).

Cookies are ``Secure`` except when the callback URL is plain HTTP on loopback (a first try
or a test on this machine, where a browser would not send a ``Secure`` cookie back).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import replace
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse

from scheduler.access.sessions import LOGIN_TTL_S, Session
from scheduler.errors import ForbiddenError, UnauthenticatedError
from scheduler.principal import Principal
from scheduler.verbs import sso
from scheduler.verbs.stores import Stores

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "clear_session",
    "console_page",
    "cookie_principal",
    "router",
    "secure_cookies",
    "set_session",
]

router = APIRouter(prefix="/auth", tags=["auth"])

SESSION_COOKIE = "fleetsched_session"
CSRF_COOKIE = "fleetsched_csrf"
LOGIN_COOKIE = "fleetsched_login"
NEXT_COOKIE = "fleetsched_next"  # the console page a login returns to
CONSOLE = "/ui"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_PROVIDER_ERROR = re.compile(r"[a-z_]{1,40}")  # an OAuth error code, shown back only if it is one


def _stores(request: Request) -> Stores:
    stores: Stores = request.app.state.stores
    return stores


def _redirect_uri(request: Request) -> str:
    configured = _stores(request).settings.oidc_redirect_url
    return configured or str(request.url_for("callback"))


def secure_cookies(request: Request) -> bool:
    """Whether cookies are ``Secure``: everywhere but a plain-HTTP loopback deployment."""
    parts = urlsplit(_redirect_uri(request))
    return not (parts.scheme == "http" and parts.hostname in ("127.0.0.1", "::1", "localhost"))


def cookie_principal(request: Request) -> Principal | None:
    """The principal of the request's session cookie; None when it sends a bearer token or no
    cookie. ``UnauthenticatedError`` for a dead session, ``ForbiddenError`` for a write
    without the session's CSRF token."""
    session_id = request.cookies.get(SESSION_COOKIE)
    if "authorization" in request.headers or not session_id:
        return None
    session = sso.session_of(_stores(request), session_id)
    if request.method not in SAFE_METHODS:
        echoed = request.headers.get(CSRF_HEADER, "")
        if not secrets.compare_digest(echoed.encode(), session.csrf.encode()):
            raise ForbiddenError(f"a write with a session cookie needs the {CSRF_HEADER} "
                                 "header (the fleetsched_csrf cookie's value)",
                                 hint="send the header, or use a bearer token")
    return session.principal


def _who(session: Session) -> dict[str, object]:
    p = session.principal
    return {"name": p.name, "via": p.via, "role": p.role, "tenant": p.tenant,
            "csrf_token": session.csrf}


def console_page(target: str | None) -> str | None:
    """``target`` if it is a page of the web console (a path under ``/ui``, nothing that could
    send the browser to another site), else None."""
    if not target or not (target == CONSOLE or target.startswith(CONSOLE + "/")):
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or "\\" in target or "//" in parts.path:
        return None
    return target


@router.get("/login", status_code=302, response_class=RedirectResponse,
            summary="Log in with the configured identity provider (a redirect to it)")
def login(request: Request, next: str | None = None) -> Response:
    state, url = sso.begin(_stores(request), _redirect_uri(request))
    reply = RedirectResponse(url, status_code=302)
    secure = secure_cookies(request)
    reply.set_cookie(LOGIN_COOKIE, state, max_age=LOGIN_TTL_S, path="/api/v1/auth",
                     secure=secure, httponly=True, samesite="lax")
    page = console_page(next)
    if page is not None:
        reply.set_cookie(NEXT_COOKIE, page, max_age=LOGIN_TTL_S, path="/api/v1/auth",
                         secure=secure, httponly=True, samesite="lax")
    return reply


def _source(request: Request) -> str | None:
    return request.client.host if request.client else None


@router.get("/callback", summary="Where the identity provider sends the browser back")
def callback(request: Request, state: str = "", code: str = "", error: str = "") -> Response:
    try:
        return _callback(request, state, code, error)
    except (UnauthenticatedError, ForbiddenError) as exc:
        why = str(exc)
        request.state.refused = lambda: {"presented": "single sign-on callback", "why": why}
        if console_page(request.cookies.get(NEXT_COOKIE)) is None:
            raise
        # A login started at the console's sign-in page ends on a page of the console with
        # the one line, not on the API's JSON (scheduler.server.errors reads the mark).
        request.state.console = True
        hint = ("ask an administrator of fleetsched for a role"
                if isinstance(exc, ForbiddenError) else "sign in again")
        raise type(exc)(why, hint=hint) from None


def _callback(request: Request, state: str, code: str, error: str) -> Response:
    if error:
        shown = error if _PROVIDER_ERROR.fullmatch(error) else "an error"
        raise UnauthenticatedError(f"the identity provider refused the login: {shown}",
                                   hint="log in again: GET /api/v1/auth/login")
    if not state or not code:
        raise UnauthenticatedError("the callback needs the provider's state and code",
                                   hint="start at GET /api/v1/auth/login")
    session_id, session = sso.complete(_stores(request), state, code,
                                       request.cookies.get(LOGIN_COOKIE), _source(request))
    page = console_page(request.cookies.get(NEXT_COOKIE))
    reply: Response = (RedirectResponse(page, status_code=303) if page
                       else JSONResponse(_who(session)))
    set_session(request, reply, session_id, session)
    secure = secure_cookies(request)
    for name in (LOGIN_COOKIE, NEXT_COOKIE):
        reply.delete_cookie(name, path="/api/v1/auth", secure=secure, httponly=True,
                            samesite="lax")
    return reply


def set_session(request: Request, reply: Response, session_id: str, session: Session) -> None:
    """Give the browser the session's two cookies (single sign-on's callback, the console's
    sign-in with a token)."""
    lifetime = _stores(request).settings.oidc_session_minutes * 60
    secure = secure_cookies(request)
    reply.set_cookie(SESSION_COOKIE, session_id, max_age=lifetime, path="/", secure=secure,
                     httponly=True, samesite="lax")
    reply.set_cookie(CSRF_COOKIE, session.csrf, max_age=lifetime, path="/", secure=secure,
                     httponly=False, samesite="lax")


def clear_session(request: Request, reply: Response) -> None:
    """Take the session's two cookies back (logout)."""
    secure = secure_cookies(request)
    reply.delete_cookie(SESSION_COOKIE, path="/", secure=secure, httponly=True, samesite="lax")
    reply.delete_cookie(CSRF_COOKIE, path="/", secure=secure, samesite="lax")


@router.get("/session", summary="The session's principal and CSRF token")
def session(request: Request) -> dict[str, object]:
    session_id = request.cookies.get(SESSION_COOKIE)
    if not session_id:
        raise UnauthenticatedError("no session cookie", hint="log in: GET /api/v1/auth/login")
    return _who(sso.session_of(_stores(request), session_id))


@router.post("/logout", status_code=204, summary="End the session")
def logout(request: Request) -> Response:
    who = cookie_principal(request)
    if who is None:
        raise UnauthenticatedError("no session to end (logout is for session cookies; revoke "
                                   "a token with `fleetsched tokens revoke`)")
    sso.end(_stores(request), request.cookies[SESSION_COOKIE],
            replace(who, source=_source(request)))
    reply = Response(status_code=204)
    clear_session(request, reply)
    return reply
