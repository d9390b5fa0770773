"""``/api/v1/status``, ``/api/v1/hosts`` (paged), one host and its history (paged), and
``/api/v1/groups``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.paging import Limit, Offset, page
from scheduler.verbs import inventory, status

__all__ = ["router"]

router = APIRouter()


@router.get("/status", tags=["status"], summary="The health checks, as `fleetsched status` "
                                                "(a customer: its hosts, tasks and jobs counted)")
def get_status(request: Request,
               who: Annotated[Principal, Depends(allowed("status"))]) -> dict[str, Any]:
    if who.tenant is not None:
        return status.tenant_status(stores_of(request), who.tenant)
    findings = [f.as_dict() for f in status.status(stores_of(request))]
    worst = "fail" if any(f["level"] == "fail" for f in findings) else (
        "warn" if any(f["level"] == "warn" for f in findings) else "ok")
    return {"level": worst, "findings": findings}


@router.get("/hosts", tags=["hosts"], summary="Hosts by name (paged)")
def list_hosts(request: Request, who: Annotated[Principal, Depends(allowed("hosts.list"))],
               limit: Limit = 100, offset: Offset = 0, group: str | None = None,
               match: str | None = None) -> dict[str, Any]:
    rows = inventory.list_hosts(stores_of(request), group=group, match=match,
                                limit=limit + 1, offset=offset, tenant=who.tenant)
    return page(rows, limit=limit, offset=offset)


@router.get("/hosts/{name}", tags=["hosts"],
            summary="One host: address, port, user, groups, variables, source")
def show_host(request: Request, name: str,
              who: Annotated[Principal, Depends(allowed("hosts.show"))]) -> dict[str, Any]:
    return inventory.show_host(stores_of(request), name, tenant=who.tenant)


@router.get("/hosts/{name}/history", tags=["hosts"],
            summary="A host's recorded events, newest first (paged)")
def host_history(request: Request, name: str,
                 who: Annotated[Principal, Depends(allowed("hosts.history"))],
                 limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    rows = inventory.host_history(stores_of(request), name, limit=limit + 1, offset=offset,
                                  tenant=who.tenant)
    return page(rows[::-1], limit=limit, offset=offset)  # the verb answers oldest first


@router.get("/groups", tags=["hosts"],
            summary="Groups by name: limit, host counts, children, parents, variables")
def list_groups(request: Request,
                who: Annotated[Principal, Depends(allowed("groups.list"))]) -> dict[str, Any]:
    return {"items": inventory.list_groups(stores_of(request))}
