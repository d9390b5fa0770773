"""The request's principal: ``Authorization: Bearer fst_...`` checked on every request (a
revoked or expired token is refused at once), then the role's check for the route's verb.

``allowed("tasks.cancel")`` is a FastAPI dependency that gives the route its ``Principal``.
The token is read from the header only (never a query string, which logs would keep). A
request without one may carry a single sign-on session cookie instead
(``scheduler.server.sso.cookie_principal``, which also checks a write's CSRF token).
A refused one leaves in the request's state how to describe it (``refused``), which
``scheduler.server.hardening`` records as an ``auth_fail`` event when it is due.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fastapi import Request

from scheduler.errors import UnauthenticatedError
from scheduler.principal import Principal
from scheduler.server.read_cache import write_begins
from scheduler.server.sso import SESSION_COOKIE, cookie_principal
from scheduler.verbs import access
from scheduler.verbs.stores import Stores

__all__ = ["allowed", "stores_of"]


def stores_of(request: Request) -> Stores:
    stores: Stores = request.app.state.stores
    return stores


def _bearer(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthenticatedError("no API token: send `Authorization: Bearer fst_...`",
                                   hint="create one with `fleetsched tokens create`")
    return token.strip()


def _presented(request: Request) -> Callable[[], dict[str, Any]]:
    """How to describe what a refused request presented (run only if it is recorded)."""
    if "authorization" in request.headers:
        stores, token = stores_of(request), request.headers["authorization"].partition(" ")[2]
        return lambda: access.refusal(stores, token.strip())
    if request.cookies.get(SESSION_COOKIE):
        return lambda: {"presented": "session cookie", "why": "unknown, ended or expired"}
    return lambda: {"presented": "nothing"}


def allowed(verb: str) -> Callable[[Request], Principal]:
    """A dependency: the request's principal, if its role may call ``verb``."""

    def principal(request: Request) -> Principal:
        try:
            who = cookie_principal(request) or access.authenticate(stores_of(request),
                                                                    _bearer(request))
        except UnauthenticatedError:
            request.state.refused = _presented(request)
            raise
        who = replace(who, source=request.client.host if request.client else None)
        request.state.principal = who  # for the access log (scheduler.server.observe)
        access.authorize(who, verb)
        write_begins(request)  # the read cache keeps nothing past a write (read_cache)
        return who

    return principal
