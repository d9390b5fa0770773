"""``/ui/customer``: a customer's home, for a principal with a tenant (``viewer.customer``):
its hosts (paged), its windows waiting for its approval, its freezes and the latest tasks that
ran on its hosts. Every list is the verb's own, called with ``tenant=``: the page never reads
another customer's row, nor decides what is its customer's.

A team principal (no tenant) has no customer view: the page says so and points to the fleet
and the calendar (200, not 404: the address exists, it is just not theirs).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from scheduler.server.auth import stores_of
from scheduler.server.console.web import Viewer, render, viewer
from scheduler.verbs import inventory, tasks, windows

__all__ = ["router"]

router = APIRouter()

HOSTS_PAGE = 50
TASKS_SHOWN = 20


@router.get("/customer", include_in_schema=False)
def customer_page(request: Request, seen: Annotated[Viewer, Depends(viewer)],
                  offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0) -> Response:
    tenant = seen.customer
    if tenant is None:
        return render(request, seen, "customer.html", tenant=None)
    stores = stores_of(request)
    context: dict[str, Any] = {"tenant": tenant, "offset": offset, "limit": HOSTS_PAGE}
    if seen.may("hosts.list"):
        hosts = inventory.list_hosts(stores, limit=HOSTS_PAGE + 1, offset=offset,
                                     tenant=tenant)
        context.update(hosts=hosts[:HOSTS_PAGE], more=len(hosts) > HOSTS_PAGE)
    if seen.may("windows.list"):
        rows = windows.list_(stores, tenant=tenant)
        context.update(awaiting=[r for r in rows if r["kind"] != "freeze" and
                                 (r["pending"] or r["denied"])],
                       freezes=[r for r in rows if r["kind"] == "freeze"])
    if seen.may("tasks.list"):
        context["tasks"] = tasks.list_(stores, limit=TASKS_SHOWN, tenant=tenant)
    return render(request, seen, "customer.html", **context)
