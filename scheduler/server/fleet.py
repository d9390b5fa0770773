"""``/api/v1/status``, ``/api/v1/hosts`` (paged) and ``/api/v1/windows/{name}/approve``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.paging import Limit, Offset, page
from scheduler.verbs import inventory, status, windows

__all__ = ["router"]

router = APIRouter()


@router.get("/status", tags=["status"], summary="The health checks, as `fleetsched status`")
def get_status(request: Request,
               who: Annotated[Principal, Depends(allowed("status"))]) -> dict[str, Any]:
    findings = [f.as_dict() for f in status.status(stores_of(request))]
    worst = "fail" if any(f["level"] == "fail" for f in findings) else (
        "warn" if any(f["level"] == "warn" for f in findings) else "ok")
    return {"level": worst, "findings": findings}


@router.get("/hosts", tags=["hosts"], summary="Hosts by name (paged)")
def list_hosts(request: Request, who: Annotated[Principal, Depends(allowed("hosts.list"))],
               limit: Limit = 100, offset: Offset = 0, group: str | None = None,
               match: str | None = None) -> dict[str, Any]:
    rows = inventory.list_hosts(stores_of(request), group=group, match=match,
                                limit=limit + 1, offset=offset)
    return page(rows, limit=limit, offset=offset)


@router.post("/windows/{name}/approve", tags=["windows"],
             summary="Approve a window that requires approval")
def approve_window(request: Request, name: str,
                   who: Annotated[Principal, Depends(allowed("windows.approve"))]
                   ) -> dict[str, Any]:
    done = windows.approve(stores_of(request), who, name)
    return {"window": done.window, "by": done.by, "at": done.at.isoformat(),
            "notes": list(done.notes)}
