"""``/api/v1/templates``: list, show (a version), add (a new version when the file changed),
remove, and run.

A template's body holds the template file's text (``file``), as ``templates add --file``
reads it. A run's body holds the parameters' values (text as typed, or JSON values) and
``dry_run``; the ``Idempotency-Key`` header is ``POST /tasks``'s, and so is the answer
(``scheduler.server.tasks.submission_answer``). A customer's token sees and runs its own
templates only (another's is not found); a role the template does not name is refused (403).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.tasks import submission_answer
from scheduler.templates.store import MAX_VERSION
from scheduler.verbs import templates

__all__ = ["router"]

router = APIRouter(prefix="/templates", tags=["templates"])

FILE = ("parameters:\n  service: {type: choice, choices: [nginx, haproxy]}\n"
        "action: command\ntarget: group:web\nparams: {cmd: \"systemctl restart "
        "{param.service}\"}\n")


class TemplateBody(BaseModel):
    """``templates add``'s options, and the template file's text."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(examples=["restart-service"])
    file: str = Field(max_length=1 << 20, examples=[FILE],
                      description="The template file: a task file with {param.NAME} "
                                  "placeholders and a parameters: mapping declaring them.")
    run_roles: list[str] | None = Field(None, description="The roles that may run it "
                                        "(admin always may); omitted: unchanged.")
    tenant: str | None = Field(None, description="The customer it belongs to.")
    description: str | None = None


class RunBody(BaseModel):
    """A run: the parameters' values, and whether it is a dry run."""

    model_config = ConfigDict(extra="forbid")
    params: dict[str, Any] = Field(default_factory=dict, examples=[{"service": "nginx"}])
    version: int | None = Field(None, ge=1, le=MAX_VERSION,
                                description="This version (default: the newest, "
                                "or the one the path pins: NAME@3).")
    dry_run: bool = False


@router.get("", summary="Every template the caller sees: newest version, parameters, roles")
def list_templates(request: Request,
                   who: Annotated[Principal, Depends(allowed("templates.list"))]
                   ) -> dict[str, Any]:
    return {"items": templates.list_(stores_of(request), tenant=who.tenant)}


@router.post("", status_code=201, summary="Add a template, or its next version when the "
                                          "file changed")
def add_template(request: Request, body: TemplateBody,
                 who: Annotated[Principal, Depends(allowed("templates.add"))]
                 ) -> dict[str, Any]:
    done = templates.add(stores_of(request), who, body.name, body.file,
                         source=f"template {body.name}", tenant=body.tenant,
                         run_roles=body.run_roles, description=body.description)
    return done.as_dict()


@router.get("/{name}", summary="One template: a version's file and parameters, who may run "
                               "it, its versions and last runs")
def show_template(request: Request, name: str,
                  who: Annotated[Principal, Depends(allowed("templates.show"))],
                  version: Annotated[int | None, Query(ge=1, le=MAX_VERSION)] = None) -> dict[str, Any]:
    return templates.show(stores_of(request), name, version=version, tenant=who.tenant)


@router.delete("/{name}", summary="Remove a template (refused while a schedule fires it)")
def remove_template(request: Request, name: str,
                    who: Annotated[Principal, Depends(allowed("templates.remove"))]
                    ) -> dict[str, Any]:
    versions = templates.remove(stores_of(request), who, name)
    return {"template": name, "versions": versions, "by": who.name}


@router.post("/{name}/run", status_code=201,
             summary="Run a template (NAME or NAME@VERSION) with its parameters' values: "
                     "submitted as POST /tasks would")
def run_template(request: Request, response: Response, name: str, body: RunBody,
                 who: Annotated[Principal, Depends(allowed("templates.run"))],
                 idempotency_key: Annotated[str | None, Header(
                     alias="Idempotency-Key", description="As POST /tasks': the same key "
                     "again gives the first task back.")] = None) -> dict[str, Any]:
    done = templates.run(stores_of(request), who, name, body.params, version=body.version,
                         dry_run=body.dry_run, request_key=idempotency_key)
    return submission_answer(done, response)
