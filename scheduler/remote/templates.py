"""Templates over the API (``scheduler.verbs.templates``): list, show, add, remove and run,
each answer rebuilt as the local verb's result (``TemplateAdded``, ``Submission``). A run
asks the plan first when the CLI confirms a fleet-wide task, as ``remote.submit`` does."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scheduler.remote.client import Client
from scheduler.verbs.templates import TemplateAdded

if TYPE_CHECKING:
    from scheduler.submission.plan_view import PlanView
    from scheduler.verbs.submit import Submission

__all__ = ["add", "list_", "remove", "run", "show"]


def _path(name: str, *rest: str) -> str:
    return "/".join([f"/templates/{quote(name, safe='')}", *rest])


def list_(stores: Client, *, tenant: str | None = None) -> list[dict[str, Any]]:
    return stores.get("/templates")["items"]


def show(stores: Client, name: str, *, version: int | None = None,
         tenant: str | None = None) -> dict[str, Any]:
    return stores.get(_path(name), **({"version": version} if version else {}))


def add(stores: Client, _principal: None, name: str, text: str, *, source: str,
        tenant: str | None = None, run_roles: Sequence[str] | None = None,
        description: str | None = None) -> TemplateAdded:
    done = stores.post("/templates", {"name": name, "file": text, "tenant": tenant,
                                      "run_roles": None if run_roles is None else list(run_roles),
                                      "description": description})
    return TemplateAdded(**done)


def remove(stores: Client, _principal: None, name: str) -> int:
    return int(stores.delete(_path(name))["versions"])


def run(stores: Client, _principal: None, ref: str, values: Mapping[str, Any], *,
        version: int | None = None, dry_run: bool = False,
        confirm: Callable[[PlanView], None] | None = None,
        request_key: str | None = None) -> Submission:
    from scheduler.remote.submit import post_submission

    return post_submission(stores, _path(ref, "run"), {"params": dict(values), "version": version},
                           dry_run=dry_run, confirm=confirm, request_key=request_key)
