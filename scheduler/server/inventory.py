"""The inventory's administrative verbs over HTTP: ``POST /api/v1/hosts/check`` (a page of the
target's hosts per request), ``POST /api/v1/hosts/import`` (an inventory sent as text),
``GET /api/v1/hosts/export``, ``POST /api/v1/hosts`` and ``DELETE /api/v1/hosts/{name}``
(``hosts add``, ``hosts remove``), ``POST /api/v1/groups/{name}/limit`` and
``DELETE /api/v1/groups/{name}`` (``groups remove``).

A host check reaches hosts over SSH while the request waits, so one request checks at most
``CHECK_MAX`` hosts, ``CHECK_CONCURRENCY_MAX`` at a time, each within ``CHECK_TIMEOUT_MAX``;
the answer's ``next_offset`` names the next page. The SSH options are the server's settings
(a caller never names a key file on the server).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from scheduler.errors import ValidationError
from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.verbs import inventory
from scheduler.verbs.inventory import CHECK_CONCURRENCY_MAX, CHECK_MAX, CHECK_TIMEOUT_MAX

__all__ = ["CHECK_CONCURRENCY_MAX", "CHECK_MAX", "CHECK_TIMEOUT_MAX", "router"]

router = APIRouter(tags=["hosts"])


class CheckBody(BaseModel):
    """What ``hosts check`` takes, bounded for a request that waits."""

    model_config = ConfigDict(extra="forbid")
    target: str = Field("all", min_length=1, max_length=10_000, examples=["group:web"])
    concurrency: int = Field(20, ge=1, le=CHECK_CONCURRENCY_MAX)
    timeout: str = Field("10s", description="Per host: connect, handshake, login, and each "
                                            f"command; at most {CHECK_TIMEOUT_MAX:.0f}s.")
    become_user: str | None = None
    limit: int = Field(50, ge=1, le=CHECK_MAX, description="Hosts checked, by name.")
    offset: int = Field(0, ge=0)


class ImportBody(BaseModel):
    """An inventory sent as text: ``hosts import``'s file and options."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The inventory's name (its hosts' source is api:NAME; a "
                                  "prune removes only what this name imported).",
                      examples=["cmdb.ini"])
    inventory: str = Field(description="The inventory's text: ansible-inventory --list JSON, "
                                       "INI or YAML.")
    format: Literal["json", "ini", "yaml"] | None = Field(
        None, description="Default: by the name's extension, then by content.")
    prune: bool = False
    dry_run: bool = False


class HostBody(BaseModel):
    """One host added by hand: ``hosts add``'s options."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(examples=["db-09"])
    address: str | None = Field(None, description="Default: the name.")
    port: int | None = Field(None, description="Default: 22.")
    user: str | None = None
    groups: list[str] = Field([], max_length=1000, description="Created if new.")
    vars: dict[str, Any] = Field({}, max_length=1000)


class LimitBody(BaseModel):
    """A group's limit across all tasks: N or P%, or null to remove it."""

    model_config = ConfigDict(extra="forbid")
    max_busy: str | None = Field(examples=["2", "10%"])


@router.post("/hosts/check", summary="Check SSH to a page of the target's hosts, as the "
                                     "workers would (strict: never adds a host key)")
def check_hosts(request: Request, body: CheckBody,
                who: Annotated[Principal, Depends(allowed("hosts.check"))]) -> dict[str, Any]:
    from scheduler.parse import parse_duration

    per_host = parse_duration(body.timeout, "timeout").total_seconds()
    if per_host > CHECK_TIMEOUT_MAX:
        raise ValidationError(f"timeout {body.timeout!r} is over {CHECK_TIMEOUT_MAX:.0f}s",
                              hint="check slow hosts with `fleetsched hosts check` at a shell")
    done = inventory.check_hosts(stores_of(request), body.target, options={},
                                 concurrency=body.concurrency, timeout_s=per_host,
                                 become_user=body.become_user, limit=body.limit,
                                 offset=body.offset)
    following = body.offset + len(done.probes)
    return {"target": body.target, "hosts": [p.as_dict() for p in done.probes],
            "summary": done.counts, "ok": done.counts.get("ok", 0) == len(done.probes),
            "selected": done.selected, "offset": body.offset, "known_hosts": done.known_hosts,
            "next_offset": following if following < done.selected else None}


@router.post("/hosts/import", summary="Add and update hosts and groups from an inventory sent "
                                      "as text, matched by name")
def import_hosts(request: Request, body: ImportBody,
                 who: Annotated[Principal, Depends(allowed("hosts.import"))]
                 ) -> dict[str, Any]:
    done = inventory.import_text(stores_of(request), who, body.inventory, name=body.name,
                                 fmt=body.format, prune=body.prune, dry_run=body.dry_run)
    answer = done.as_dict()
    return {"source": answer.pop("path"), **answer, "by": who.name, "notes": done.notes}


@router.post("/hosts", summary="Add one host by hand (an import never prunes it)")
def add_host(request: Request, body: HostBody,
             who: Annotated[Principal, Depends(allowed("hosts.add"))]) -> dict[str, Any]:
    done = inventory.add_host(stores_of(request), who, body.name, address=body.address,
                              port=body.port, user=body.user, groups=body.groups,
                              host_vars=body.vars)
    return {"host": body.name, "created": done.created, "by": who.name, "notes": done.notes}


@router.delete("/hosts/{name}", summary="Remove one host, its memberships and its connection "
                                        "data in Redis")
def remove_host(request: Request, name: str,
                who: Annotated[Principal, Depends(allowed("hosts.remove"))]) -> dict[str, Any]:
    done = inventory.remove_host(stores_of(request), who, name)
    return {"host": name, "by": who.name, "notes": done.notes}


@router.get("/hosts/export", summary="The target's hosts, groups and variables as an Ansible "
                                     "inventory (ini, yaml or ansible-json)",
            responses={200: {"content": {"text/plain": {}, "application/json": {}}}})
def export_hosts(request: Request,
                 who: Annotated[Principal, Depends(allowed("hosts.export"))],
                 target: Annotated[str, Query(min_length=1, max_length=10_000)] = "all",
                 fmt: Annotated[Literal["ini", "yaml", "ansible-json"],
                                Query(alias="format")] = "ini") -> Response:
    from scheduler.inventory import render_export

    text = render_export(inventory.export_hosts(stores_of(request), target), fmt)
    media = "application/json" if fmt == "ansible-json" else "text/plain; charset=utf-8"
    return Response(text, media_type=media)


@router.post("/groups/{name}/limit", summary="Limit how many jobs run at once on a group's "
                                             "hosts, across all tasks (null: remove it)")
def limit_group(request: Request, name: str, body: LimitBody,
                who: Annotated[Principal, Depends(allowed("groups.limit"))]) -> dict[str, Any]:
    done = inventory.limit_group(stores_of(request), who, name, body.max_busy)
    return {"group": name, "max_busy": done.count, "hosts": len(done.members),
            "members": sorted(done.members), "by": done.by}


@router.delete("/groups/{name}", summary="Remove a group (its hosts stay)")
def remove_group(request: Request, name: str,
                 who: Annotated[Principal, Depends(allowed("groups.remove"))]
                 ) -> dict[str, Any]:
    done = inventory.remove_group(stores_of(request), who, name)
    return {"group": name, "hosts": done.count, "by": who.name, "notes": done.notes}
