"""``/ui/windows/{name}``: one service window: its definition and version, its next openings
each with its approval state and the decisions that speak to it, the hosts it covers, the jobs
waiting on it, and, for a viewer whose party must approve it, the Approve and Deny forms (and
Revoke, once its party approved).

1. Every read is a verb of ``scheduler.verbs.windows`` called with ``tenant=``: a customer sees
   its own assignments, hosts, decisions and jobs only, and another customer's window is a
   404, as one that does not exist (the verb says so, GET and POST alike).
2. A decision is the verb's (``windows.approve``, ``deny``, ``revoke``): the form carries the
   CSRF field and the version the viewer read, so a decision on a version that changed since is
   refused (409, the verb's one line) instead of approving what the viewer never saw.
3. After a decision the browser goes back to the window's page (303), which shows it.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from scheduler.errors import ValidationError
from scheduler.server.auth import stores_of
from scheduler.server.console.web import PREFIX, Viewer, form, page_viewer, render
from scheduler.verbs import inventory
from scheduler.verbs import windows as window_verbs
from scheduler.windows.approvals import party_name

__all__ = ["router"]

router = APIRouter()

OPENINGS = 5
LISTED = 50  # jobs waiting, hosts of one group: the first ones, then "and more"
MAX_COMMENT = 2000  # as the API's decision body


@router.get("/windows/{name}", include_in_schema=False)
def window_page(request: Request, name: str,
                seen: Annotated[Viewer, Depends(page_viewer("windows.show"))]) -> Response:
    stores = stores_of(request)
    tenant = seen.customer
    info = window_verbs.show(stores, name, tenant=tenant)
    own = party_name(tenant)
    openings = window_verbs.openings(stores, name, OPENINGS, tenant=tenant) \
        if seen.may("windows.next") else []
    waiting = window_verbs.waiting(stores, name, tenant=tenant, limit=LISTED + 1)
    awaits_us = own in info.get("parties", [])  # a freeze has no parties
    standing = [d for d in info.get("decisions", []) if d["party"] == own and d["current"]
                and d["decision"] == "approved" and d["revoked_at"] is None]
    return render(request, seen, "window.html", w=info, openings=openings,
                  waiting=waiting[:LISTED], more_waiting=len(waiting) > LISTED,
                  covered=_covered(request, info, tenant), own=own,
                  may_approve=awaits_us and seen.may("windows.approve"),
                  may_deny=awaits_us and seen.may("windows.deny"),
                  may_revoke=bool(standing) and seen.may("windows.revoke"))


def _covered(request: Request, info: dict[str, Any],
             tenant: str | None) -> list[tuple[str, list[str], bool]]:
    """Each assignment (already the viewer's own ones) with the hosts it brings."""
    out = []
    for target in info["assigned"]:
        kind, _, what = target.partition(":")
        if kind == "host":
            out.append((target, [what], False))
            continue
        hosts = inventory.list_hosts(stores_of(request), group=what, limit=LISTED + 1,
                                     tenant=tenant)
        out.append((target, [h["name"] for h in hosts[:LISTED]], len(hosts) > LISTED))
    return out


def _back(name: str) -> Response:
    return RedirectResponse(f"{PREFIX}/windows/{quote(name, safe='')}", status_code=303)


def _decision(fields: dict[str, str]) -> tuple[str | None, int | None]:
    """The form's comment (None when blank) and version (None when absent)."""
    comment = fields.get("comment", "").strip() or None
    if comment is not None and len(comment) > MAX_COMMENT:
        raise ValidationError(f"the comment is longer than {MAX_COMMENT} characters")
    text = fields.get("version", "").strip()
    if not text:
        return comment, None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValidationError(f"version {text!r} must be a whole number from 1")
    return comment, int(text)


@router.post("/windows/{name}/approve", include_in_schema=False)
async def approve(request: Request, name: str,
                  seen: Annotated[Viewer, Depends(page_viewer("windows.approve"))]) -> Response:
    comment, version = _decision(await form(request, seen))
    window_verbs.approve(stores_of(request), seen.principal, name, comment=comment,
                         version=version)
    return _back(name)


@router.post("/windows/{name}/deny", include_in_schema=False)
async def deny(request: Request, name: str,
               seen: Annotated[Viewer, Depends(page_viewer("windows.deny"))]) -> Response:
    comment, version = _decision(await form(request, seen))
    window_verbs.deny(stores_of(request), seen.principal, name, comment=comment or "",
                      version=version)
    return _back(name)


@router.post("/windows/{name}/revoke", include_in_schema=False)
async def revoke(request: Request, name: str,
                 seen: Annotated[Viewer, Depends(page_viewer("windows.revoke"))]) -> Response:
    await form(request, seen)
    window_verbs.revoke(stores_of(request), seen.principal, name)
    return _back(name)
