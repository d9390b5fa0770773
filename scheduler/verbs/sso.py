"""Single sign-on for people, as verbs the HTTP API calls: start a login, finish it into a
session, find a session's principal, end it (``scheduler.access.oidc`` speaks to the issuer,
``scheduler.access.sessions`` keeps logins and sessions in Redis).

A login and a logout are audit events (``login``, ``logout``) naming the principal as every
event does (``oidc:<issuer>#<subject>``, role, tenant, the client's address), never the
session id, the code or a token; a refused login is an ``auth_fail`` event
(``scheduler.server.hardening``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from scheduler.access import oidc, sessions
from scheduler.errors import UnauthenticatedError

if TYPE_CHECKING:
    import redis

    from scheduler.access.sessions import Session
    from scheduler.principal import Principal
    from scheduler.queue.keys import Keys
    from scheduler.verbs.stores import Stores

__all__ = ["begin", "complete", "end", "session_of", "token_session"]

log = logging.getLogger("fleetsched.server.sso")


@contextmanager
def _sessions(stores: Stores) -> Iterator[tuple[redis.Redis, Keys]]:
    with stores.redis_client() as client:
        yield client, stores.shards.coord


def begin(stores: Stores, redirect_uri: str) -> tuple[str, str]:
    """Start a login: its state (for the browser's login cookie) and the issuer's URL."""
    login, url = oidc.start(stores.settings, redirect_uri)
    with _sessions(stores) as (client, keys):
        sessions.keep_login(client, keys, login)
    return login.state, url


def complete(stores: Stores, state: str, code: str, browser_state: str | None,
             source: str | None = None) -> tuple[str, Session]:
    """Finish the login of ``state`` with the issuer's ``code``: a new session (its id for the
    cookie, and the session). The state must be one this server started, not used before,
    and the one the same browser was given (``browser_state``, from its login cookie), so
    nobody can log a victim into their own account with a callback link. Recorded as a
    ``login`` event from ``source`` (the client's address)."""
    refused = UnauthenticatedError("this login is unknown, expired or already used",
                                   hint="log in again: GET /api/v1/auth/login")
    with _sessions(stores) as (client, keys):
        login = sessions.take_login(client, keys, state)
        if login is None or browser_state != state:
            raise refused
        claims = oidc.finish(stores.settings, login, code)
        principal = oidc.identity(stores.settings, claims)
        session_id, session = sessions.open_session(
            client, keys, principal, stores.settings.oidc_session_minutes * 60)
    _record(stores, "login", replace(principal, source=source),
            {"session_minutes": stores.settings.oidc_session_minutes})
    log.info("single sign-on: %s logged in as %s (%s)", principal.name, principal.role,
             principal.via)
    return session_id, session


def token_session(stores: Stores, token: str, source: str | None = None) -> tuple[str, Session]:
    """A session for the bearer ``token``'s principal (the web console's sign-in with a token,
    for a first try or where no identity provider is set): the same session, cookies and
    CSRF token as single sign-on gives, for ``oidc_session_minutes`` and no longer than the
    token lives (``session_of`` checks it on every request). Recorded as a ``login`` event; the token is never kept."""
    from scheduler.verbs.access import authenticate

    principal = authenticate(stores, token)
    seconds = stores.settings.oidc_session_minutes * 60
    with _sessions(stores) as (client, keys):
        session_id, session = sessions.open_session(client, keys, principal, seconds)
    _record(stores, "login", replace(principal, source=source),
            {"session_minutes": stores.settings.oidc_session_minutes, "with": "token"})
    log.info("console: %s signed in with token %s as %s", principal.name, principal.via,
             principal.role)
    return session_id, session


def _record(stores: Stores, kind: str, principal: Principal, data: dict[str, object]) -> None:
    from scheduler.record.audit import record_event
    from scheduler.record.session import transaction

    with stores.database() as engine, transaction(engine) as session:
        record_event(session, kind, operator=principal, data=data)


def session_of(stores: Stores, session_id: str) -> Session:
    """The live session of the cookie's ``session_id`` (``UnauthenticatedError`` if none)."""
    with _sessions(stores) as (client, keys):
        found = sessions.find(client, keys, session_id)
    if found is None or not _token_live(stores, found.principal):
        raise UnauthenticatedError("the session is unknown, ended or expired",
                                   hint="log in again: GET /api/v1/auth/login")
    return found


def _token_live(stores: Stores, principal: Principal) -> bool:
    """A session opened with a token (``token_session``) lives no longer than the token: a
    revoked or expired one ends it at the next request."""
    if not principal.via.startswith("token:"):
        return True
    from scheduler.access.tokens import is_live

    with stores.reading() as session:
        return is_live(session, int(principal.via.partition(":")[2]))


def end(stores: Stores, session_id: str, principal: Principal) -> None:
    """End the session of ``session_id`` (logout), for every server process at once; recorded
    as ``principal``'s ``logout`` event."""
    with _sessions(stores) as (client, keys):
        sessions.end(client, keys, session_id)
    _record(stores, "logout", principal, {})
