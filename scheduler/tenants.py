"""A customer's settings: whether every window over its hosts needs its approval, and whom to
tell when one awaits it (its contacts: webhook URLs or ``mailto:`` addresses, as ``--notify``
takes them).

A tenant exists once a host names it (the inventory's ``fleetsched_tenant``); its settings row
(``tenants``) is optional. ``set_tenant`` writes the row with a ``tenant-set`` event (contacts
shown without their secrets); ``list_tenants`` joins the hosts' counts and the settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import ValidationError
from scheduler.principal import Principal
from scheduler.record.audit import record_event
from scheduler.record.models import Host, Tenant

__all__ = ["LIST_COLUMNS", "list_tenants", "set_tenant"]

LIST_COLUMNS = ["tenant", "hosts", "approval_required", "contacts"]
MAX_CONTACTS = 20


def _shown(contacts: Sequence[str]) -> list[str]:
    from scheduler.notify.targets import parse_target

    return [parse_target(c).shown for c in contacts]


def list_tenants(session: Session) -> list[dict[str, Any]]:
    """Every tenant a host names or a settings row holds, by name."""
    counts = dict(session.execute(sa.select(Host.tenant, sa.func.count())
                                  .where(Host.tenant.is_not(None)).group_by(Host.tenant)).all())
    rows = {t.name: t for t in session.scalars(sa.select(Tenant))}
    return [{"tenant": name, "hosts": counts.get(name, 0),
             "approval_required": bool(rows[name].approval_required) if name in rows else False,
             "contacts": ", ".join(_shown(rows[name].contacts or [])) if name in rows else ""}
            for name in sorted(set(counts) | set(rows))]


def set_tenant(session: Session, name: str, *, operator: Principal | str,
               approval_required: bool | None = None,
               contacts: Sequence[str] | None = None) -> dict[str, Any]:
    """Change tenant ``name``'s settings (None: unchanged); returns them as listed."""
    from scheduler.notify.targets import parse_target

    from scheduler.inventory.validate import tenant as valid_tenant

    try:
        name = valid_tenant(name)
    except ValueError as exc:
        raise ValidationError(str(exc).replace("fleetsched_tenant", "tenant name")) from None
    if approval_required is None and contacts is None:
        raise ValidationError("nothing to change",
                              hint="give --approval-required/--no-approval-required or --contact")
    specs = None
    if contacts is not None:
        if len(contacts) > MAX_CONTACTS:
            raise ValidationError(f"{len(contacts)} contacts: at most {MAX_CONTACTS}")
        specs = list(dict.fromkeys(parse_target(c).spec for c in contacts))
    row = session.get(Tenant, name)
    if row is None:
        row = Tenant(name=name, approval_required=False, contacts=[])
        session.add(row)
    if approval_required is not None:
        row.approval_required = approval_required
    if specs is not None:
        row.contacts = specs
    session.flush()
    shown = {"tenant": name, "approval_required": row.approval_required,
             "contacts": _shown(row.contacts or [])}
    record_event(session, "tenant-set", operator=operator, data=shown)
    return shown
