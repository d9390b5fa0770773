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
    from scheduler.remote.submit import _view
    from scheduler.submission.repeats import Repeat
    from scheduler.verbs.submit import Submission

    body = {"params": dict(values), "version": version}
    if dry_run or confirm is not None:
        planned = stores.post(_path(ref, "run"), {**body, "dry_run": True})
        view = _view(planned)
        if dry_run:
            return Submission(plan=view, operator=planned["operator"])  # type: ignore[arg-type]
        assert confirm is not None
        confirm(view)
    headers = {"Idempotency-Key": request_key} if request_key is not None else None
    done = stores.post(_path(ref, "run"), body, headers=headers)
    if done.get("repeat"):
        first = Repeat(task_id=done["task_id"], jobs=done["jobs"], state=done["state"],
                       action=done["action"])
        return Submission(plan=None, task_id=first.task_id, jobs=first.jobs,
                          operator=done["operator"], repeat=first)
    return Submission(plan=_view(done), task_id=done["task_id"],  # type: ignore[arg-type]
                      jobs=done["jobs"], operator=done["operator"])
