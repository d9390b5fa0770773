"""The customers' settings verbs: list, set (``scheduler.tenants``).

A change of whether a customer must approve its windows changes who must approve every window
over its hosts, so ``set`` copies every window to Redis again (a window that now awaits the
customer stops being used at the workers' next claim).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

__all__ = ["list_", "set_"]


def list_(stores: Stores) -> list[dict[str, Any]]:
    """Every tenant: its hosts, whether its windows need its approval, its contacts."""
    from scheduler.tenants import list_tenants

    with stores.reading() as session:
        return list_tenants(session)


def set_(stores: Stores, principal: Principal, name: str, *,
         approval_required: bool | None = None,
         contacts: Sequence[str] | None = None) -> dict[str, Any]:
    """Change tenant ``name``'s settings; ``notes``: what Redis did not take."""
    from scheduler.record.session import transaction
    from scheduler.tenants import set_tenant
    from scheduler.windows.store import sync_windows

    with stores.database() as engine:
        with transaction(engine) as session:
            done = set_tenant(session, name, operator=principal,
                              approval_required=approval_required, contacts=contacts)
        warning = None
        if approval_required is not None:
            _count, warning = sync_windows(engine, stores.connect, stores.shards)
    return {**done, "notes": [f"warning: {warning}"] if warning else []}
