"""``/api/v1/tokens``: the API's own tokens (``scheduler.verbs.tokens``): list, create (the
token is in this answer only: the record keeps its hash) and revoke (the next request that
shows it is refused). A list never holds a secret, so no token sees another's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.verbs import tokens

__all__ = ["router"]

router = APIRouter(prefix="/tokens", tags=["tokens"])


class TokenBody(BaseModel):
    """``tokens create``'s argument and options."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=255, examples=["ci-deploy"])
    role: str = Field(examples=["operator"])
    owner: str | None = Field(None, max_length=255,
                              description="Who it acts as (default: the caller).")
    tenant: str | None = Field(None, max_length=255)
    expires: str | None = Field(None, examples=["90d"],
                                description="Valid for this long; default: until revoked.")


@router.get("", summary="Tokens, never their secrets: owner, role, tenant, prefix, times")
def list_tokens(request: Request,
                who: Annotated[Principal, Depends(allowed("tokens.list"))]) -> dict[str, Any]:
    return {"items": tokens.list_(stores_of(request), who)}


@router.post("", summary="Create a token: it is in this answer only (the record keeps a hash)")
def create_token(request: Request, body: TokenBody,
                 who: Annotated[Principal, Depends(allowed("tokens.create"))]
                 ) -> dict[str, Any]:
    from dataclasses import asdict

    from scheduler.parse import parse_duration

    lifetime = parse_duration(body.expires, "--expires") if body.expires else None
    made = tokens.create(stores_of(request), who, body.name, role=body.role, owner=body.owner,
                         tenant=body.tenant, expires=lifetime)
    return asdict(made)


@router.delete("/{token_id}", summary="Revoke a token: the next request that shows it is "
                                      "refused")
def revoke_token(request: Request, token_id: Annotated[int, Path(ge=-2**63, le=2**63 - 1)],
                 who: Annotated[Principal, Depends(allowed("tokens.revoke"))]
                 ) -> dict[str, Any]:
    return tokens.revoke(stores_of(request), who, token_id)
