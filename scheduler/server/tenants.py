"""``/api/v1/tenants``: customers' settings (``scheduler.verbs.tenants``): list, and set
whether their windows need their approval and whom to tell."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.verbs import tenants

__all__ = ["router"]

router = APIRouter(prefix="/tenants", tags=["tenants"])


class TenantBody(BaseModel):
    """The settings to change (absent: unchanged)."""

    model_config = ConfigDict(extra="forbid")
    approval_required: bool | None = None
    contacts: list[str] | None = Field(None, max_length=20,
                                       examples=[["mailto:change-board@acme.example"]])


@router.get("", summary="Tenants: hosts, whether their windows need their approval, contacts")
def list_tenants(request: Request,
                 who: Annotated[Principal, Depends(allowed("tenants.list"))]) -> dict[str, Any]:
    return {"items": tenants.list_(stores_of(request))}


@router.post("/{name}", summary="Change a tenant's settings")
def set_tenant(request: Request, name: str, body: TenantBody,
               who: Annotated[Principal, Depends(allowed("tenants.set"))]) -> dict[str, Any]:
    return tenants.set_(stores_of(request), who, name, approval_required=body.approval_required,
                        contacts=body.contacts)
