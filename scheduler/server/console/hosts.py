"""``/ui/hosts``: the host search, and a host's page with its history.

1. ``GET /ui/hosts``: the verb ``hosts.list`` filtered by name pattern (``match``), group and
   host variables (``var=key=value``, repeatable; matched in SQL, ``inventory.list_hosts``),
   ``PAGE`` hosts a page.
2. ``GET /ui/hosts/{name}``: the verbs ``hosts.show`` (address, port, user, groups, variables
   as the API shows them), the windows and freezes that hold its jobs
   (``inventory.host_windows``) and ``hosts.history``: its recorded events newest first,
   ``HISTORY_PAGE`` a page, each linked to its task and job.

A customer sees its own hosts only (``tenant``, as the API's routes pass it): another's host
is not found (404), and a group without any of its hosts is one that does not exist.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from scheduler.errors import NotFoundError, ValidationError
from scheduler.server.auth import stores_of
from scheduler.server.console.web import Viewer, page_viewer, render
from scheduler.verbs import inventory

__all__ = ["router"]

router = APIRouter()

PAGE = 100  # hosts a page
HISTORY_PAGE = 50  # events a page of a host's history
MAX_OFFSET = 2**62  # past it, an offset overflows the database's integer


@router.get("/hosts", include_in_schema=False)
def hosts_page(request: Request, seen: Annotated[Viewer, Depends(page_viewer("hosts.list"))],
               match: str = "", group: str = "",
               var: Annotated[list[str] | None, Query()] = None,
               offset: Annotated[int, Query(ge=0, lt=MAX_OFFSET)] = 0) -> Response:
    from scheduler.submission.request import pairs

    wanted = [v.strip() for v in var or [] if v.strip()]
    shown = {"match": match.strip(), "group": group.strip(), "var": wanted}
    rows: list[dict[str, object]] = []
    error, status = None, 200
    try:
        rows = inventory.list_hosts(stores_of(request), match=shown["match"] or None,
                                    group=shown["group"] or None,
                                    host_vars=pairs(wanted, "var") or None,
                                    limit=PAGE + 1, offset=offset,
                                    tenant=seen.principal.tenant)
    except (ValidationError, NotFoundError) as exc:
        error, status = str(exc).splitlines()[0], 404 if isinstance(exc, NotFoundError) else 400
    args = urlencode([(k, v) for k, v in (("match", shown["match"]), ("group", shown["group"]))
                      if v] + [("var", v) for v in wanted])
    return render(request, seen, "hosts.html", status=status, rows=rows[:PAGE],
                  more=len(rows) > PAGE, offset=offset, limit=PAGE, shown=shown,
                  args=f"&{args}" if args else "", error=error)


@router.get("/hosts/{name}", include_in_schema=False)
def host_page(request: Request, name: str,
              seen: Annotated[Viewer, Depends(page_viewer("hosts.show"))],
              offset: Annotated[int, Query(ge=0, lt=MAX_OFFSET)] = 0) -> Response:
    stores = stores_of(request)
    tenant = seen.principal.tenant
    host = inventory.show_host(stores, name, tenant=tenant)  # another customer's: 404
    events: list[dict[str, object]] = []
    if seen.may("hosts.history"):
        # The verb answers the newest ``limit`` after the newest ``offset``, oldest first.
        events = inventory.host_history(stores, name, limit=HISTORY_PAGE + 1, offset=offset,
                                        tenant=tenant)[::-1]
    return render(request, seen, "host.html", host=host,
                  windows=inventory.host_windows(stores, name), events=events[:HISTORY_PAGE],
                  more=len(events) > HISTORY_PAGE, offset=offset, limit=HISTORY_PAGE)
