"""``/api/v1/windows``: list, show, next openings, add (a freeze too), edit, assign and unassign
(hosts and groups), remove, and the decisions approve, deny and revoke.

A window's body holds ``scheduler.windows.store.WindowSpec``'s fields as JSON keys (those of
``windows add``'s options); its model is made from the dataclass, so the two cannot drift, and
an unknown key is refused. An edit's body holds the fields that may change (all but ``name``
and ``freeze``), each optional, and ``version``.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, create_model

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.verbs import windows
from scheduler.windows.store import WindowSpec

__all__ = ["router"]

router = APIRouter(prefix="/windows", tags=["windows"])

_HINTS = typing.get_type_hints(WindowSpec)
WindowBody: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "WindowBody", __config__=ConfigDict(extra="forbid"),
    **{f.name: (_HINTS[f.name], ... if f.default is dataclasses.MISSING else f.default)
       for f in dataclasses.fields(WindowSpec)})

EditBody: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "EditBody", __config__=ConfigDict(extra="forbid"),
    version=(int | None, Field(None, ge=1, description="Only if the window is still at this "
                               "version (409 when it changed since).")),
    **{f.name: (_HINTS[f.name] | None, None) for f in dataclasses.fields(WindowSpec)
       if f.name not in ("name", "freeze")})


class AssignBody(BaseModel):
    """The hosts and groups a window is assigned to."""

    model_config = ConfigDict(extra="forbid")
    hosts: list[str] = Field(default_factory=list, examples=[["db-01"]])
    groups: list[str] = Field(default_factory=list, examples=[["customer-acme"]])


@router.get("", summary="Every window: rule, length, zone, approval, assignments, next opening")
def list_windows(request: Request,
                 who: Annotated[Principal, Depends(allowed("windows.list"))]) -> dict[str, Any]:
    return {"items": windows.list_(stores_of(request), tenant=who.tenant)}


@router.get("/{name}", summary="One window: definition, approval, assignments, next openings")
def show_window(request: Request, name: str,
                who: Annotated[Principal, Depends(allowed("windows.show"))]) -> dict[str, Any]:
    return windows.show(stores_of(request), name, tenant=who.tenant)


@router.get("/{name}/next", summary="A window's next openings, in its zone and in UTC "
                                   "(approved or not)")
def next_openings(request: Request, name: str,
                  who: Annotated[Principal, Depends(allowed("windows.next"))],
                  count: int = 5) -> dict[str, Any]:  # the verb refuses a bad count
    return {"items": windows.next_(stores_of(request), name, count, tenant=who.tenant)}


@router.post("", status_code=201, summary="Add a recurring or one-off window, or a freeze")
def add_window(request: Request, body: WindowBody,  # type: ignore[valid-type]
               who: Annotated[Principal, Depends(allowed("windows.add"))]) -> dict[str, Any]:
    done = windows.add(stores_of(request), who, WindowSpec(**body.model_dump()))
    return {**done.as_dict(), "requires_approval": done.requires_approval, "by": done.by,
            "notes": list(done.notes)}


@router.patch("/{name}", summary="Change a window's definition: a new version, which every "
                                 "party must approve again")
def edit_window(request: Request, name: str, body: EditBody,  # type: ignore[valid-type]
                who: Annotated[Principal, Depends(allowed("windows.edit"))]) -> dict[str, Any]:
    given = body.model_dump(exclude_none=True)
    done = windows.edit(stores_of(request), who, name, **given)
    return {"window": done.window, "count": done.count, "by": done.by,
            "notes": list(done.notes)}


@router.post("/{name}/assign", summary="Assign a window to hosts and groups")
def assign_window(request: Request, name: str, body: AssignBody,
                  who: Annotated[Principal, Depends(allowed("windows.assign"))]
                  ) -> dict[str, Any]:
    done = windows.assign(stores_of(request), who, name, hosts=body.hosts, groups=body.groups)
    return {"window": done.window, "count": done.count, "by": done.by,
            "notes": list(done.notes)}


@router.post("/{name}/unassign", summary="Remove a window's assignments to hosts and groups "
                                        "(each must hold one, or nothing is removed)")
def unassign_window(request: Request, name: str, body: AssignBody,
                    who: Annotated[Principal, Depends(allowed("windows.unassign"))]
                    ) -> dict[str, Any]:
    done = windows.unassign(stores_of(request), who, name, hosts=body.hosts,
                            groups=body.groups)
    return {"window": done.window, "count": done.count, "by": done.by,
            "notes": list(done.notes)}


@router.delete("/{name}", summary="Remove a window and its assignments (queued jobs naming "
                                  "it wait: cancel them)")
def remove_window(request: Request, name: str,
                  who: Annotated[Principal, Depends(allowed("windows.remove"))]
                  ) -> dict[str, Any]:
    done = windows.remove(stores_of(request), who, name)
    return {"window": done.window, "by": done.by, "notes": list(done.notes)}


class FreezeBody(BaseModel):
    """A freeze over hosts and groups (a customer's: its own, named ``<tenant>:<name>``)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=200, examples=["year-end"])
    start: str = Field(examples=["2026-12-20T00:00"])
    end: str = Field(examples=["2027-01-04T00:00"])
    tz: str = "UTC"
    hosts: list[str] = Field(default_factory=list, max_length=10_000)
    groups: list[str] = Field(default_factory=list, max_length=1_000)
    description: str | None = Field(None, max_length=2000)


@router.post("/freezes", status_code=201, summary="Declare a freeze over hosts and groups")
def declare_freeze(request: Request, body: FreezeBody,
                   who: Annotated[Principal, Depends(allowed("windows.freeze"))]
                   ) -> dict[str, Any]:
    done = windows.freeze(stores_of(request), who, body.name, start=body.start, end=body.end,
                          tz=body.tz, hosts=body.hosts, groups=body.groups,
                          description=body.description)
    return {**done.as_dict(), "by": done.by, "notes": list(done.notes)}


class DecisionBody(BaseModel):
    """A decision on a window's current version, for the caller's party."""

    model_config = ConfigDict(extra="forbid")
    comment: str | None = Field(None, max_length=2000)
    occurrence: str | None = Field(None, description="Only the opening starting then (ISO).")
    expires: str | None = Field(None, description="A duration from now (30d) or an ISO time.")
    version: int | None = Field(None, ge=1, description="Only if the window is still at this "
                                "version (409 when it changed since).")


@router.post("/{name}/approve", summary="Approve a window's current version for your party")
def approve_window(request: Request, name: str,
                   who: Annotated[Principal, Depends(allowed("windows.approve"))],
                   body: DecisionBody | None = None) -> dict[str, Any]:
    body = body or DecisionBody()
    return windows.approve(stores_of(request), who, name, comment=body.comment,
                           occurrence=body.occurrence, expires=body.expires,
                           version=body.version).as_dict()


@router.post("/{name}/deny", summary="Deny a window's current version for your party")
def deny_window(request: Request, name: str, body: DecisionBody,
                who: Annotated[Principal, Depends(allowed("windows.deny"))]) -> dict[str, Any]:
    return windows.deny(stores_of(request), who, name, comment=body.comment or "",
                        occurrence=body.occurrence, version=body.version).as_dict()


@router.post("/{name}/revoke", summary="Revoke your party's approval of a window")
def revoke_window(request: Request, name: str,
                  who: Annotated[Principal, Depends(allowed("windows.revoke"))]
                  ) -> dict[str, Any]:
    return windows.revoke(stores_of(request), who, name).as_dict()
