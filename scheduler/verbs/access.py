"""Who a request is, and whether it may call a verb: the HTTP API's two checks, made here so
the API calls ``scheduler.verbs`` and nothing else.

``authenticate`` runs on every request (a revoked token is refused at once); ``authorize``
before every verb, from the table of ``scheduler.access.roles``.
"""

from __future__ import annotations

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

__all__ = ["authenticate", "authorize"]


def authenticate(stores: Stores, token: str) -> Principal:
    """The principal of the bearer ``token``: its owner, ``via`` ``token:<id>``, its role and
    tenant (``UnauthenticatedError`` when it is unknown, malformed, expired or revoked)."""
    from scheduler.access.tokens import authenticate as check
    from scheduler.record.session import transaction

    # Checked in a read; only when the token's last-used time is due (once per
    # LAST_USED_EVERY) again in a write, so most requests take no write lock.
    with stores.reading() as session:
        who = check(session, token)
        stale = bool(session.dirty)
    if stale:
        with stores.database() as engine, transaction(engine) as session:
            who = check(session, token)
    return Principal(name=who.owner, via=f"token:{who.token_id}", role=who.role,
                     tenant=who.tenant)


def authorize(principal: Principal, verb: str) -> None:
    """``ForbiddenError`` unless ``principal``'s role allows ``verb`` (``noun.verb``)."""
    from scheduler.access.roles import check_role

    check_role(principal, verb)
