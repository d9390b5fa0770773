"""Who a request is, and whether it may call a verb: the HTTP API's two checks, made here so
the API calls ``scheduler.verbs`` and nothing else.

``authenticate`` runs on every request (a revoked token is refused at once); ``authorize``
before every verb, from the table of ``scheduler.access.roles``. A refused authentication is
described by ``refusal`` and recorded by ``record_refusals`` as ``auth_fail`` events, as few
as ``scheduler.access.refusals`` allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from scheduler.access.refusals import Refusal

__all__ = ["authenticate", "authorize", "record_refusals", "refusal"]


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


def refusal(stores: Stores, token: str | None) -> dict[str, Any]:
    """What a refused request presented, for its ``auth_fail`` event: a bearer ``token``'s id
    and why it failed (``scheduler.access.tokens.refused``), never the token; the principal
    only when the token's secret matched (a revoked or expired token)."""
    if not token:
        return {"presented": "nothing"}
    from scheduler.access.tokens import refused

    try:
        with stores.reading() as session:
            why = refused(session, token)
    except Exception:  # noqa: BLE001 - the record away: the failure is still recorded
        why = {"why": "not checked (the record could not be read)"}
    detail: dict[str, Any] = {"presented": "bearer token", **why}
    if "owner" in why:
        detail["principal"] = Principal(name=why["owner"], via=f"token:{why['token_id']}",
                                        role=why["role"], tenant=why["tenant"])
    return detail


def record_refusals(stores: Stores, refusals: list[Refusal]) -> None:
    """Write ``refusals`` as ``auth_fail`` events (one transaction): each names its source
    address, its count and minute, and for the first of a minute what was presented and why;
    ``principal`` as every event has it, its ``via`` null unless the token's secret matched."""
    from scheduler.record.audit import record_event
    from scheduler.record.session import transaction

    with stores.database() as engine, transaction(engine) as session:
        for r in refusals:
            detail = {k: v for k, v in r.detail.items()
                      if k not in ("principal", "owner", "role", "tenant")}
            who = r.detail.get("principal")
            principal = (who.audit() if isinstance(who, Principal)
                         else {"via": None, "role": None, "tenant": None})
            data = {"count": r.count, "minute": r.minute.isoformat(), **detail,
                    "principal": {**principal, "source": r.source}}
            if r.source is None:
                data["addresses"] = r.addresses
            record_event(session, "auth_fail", data=data,
                         operator=who.name if isinstance(who, Principal) else None)
