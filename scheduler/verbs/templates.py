"""Saved job templates' verbs: add (a new version when the file changed), list, show, remove,
and run.

1. ``add`` records the template file as the principal's (``templates.store.add_template``).
2. ``run`` builds the run's request from the template (the principal's tenant sees its own
   templates only; its role must be one the template names; the values are typed and filled
   in: a bad one is one line, nothing written), then submits it through
   ``scheduler.verbs.submit.submit``, the verb ``fleetsched submit`` calls: plan, waves,
   windows, freezes, the idempotency key and the confirmation all apply as there. A customer's
   template is refused before the confirmation if its plan selects another's host.
3. ``list_`` and ``show`` read as the principal's tenant (another customer's: not found).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from scheduler.submission.submit import Plan
    from scheduler.verbs.submit import Submission

__all__ = ["TemplateAdded", "add", "list_", "remove", "run", "show"]


@dataclass(frozen=True)
class TemplateAdded:
    """What ``add`` did: the template's newest ``version``, whether the template is new
    (``created``), whether this file made a new version (``changed``: False for the same
    file), whether its roles or description changed, and by whom."""

    name: str
    version: int
    created: bool
    changed: bool
    settings_changed: bool
    run_roles: list[str]
    tenant: str | None
    parameters: list[str]
    by: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "created": self.created,
                "changed": self.changed, "settings_changed": self.settings_changed,
                "run_roles": self.run_roles, "tenant": self.tenant,
                "parameters": self.parameters, "by": self.by}


def add(stores: Stores, principal: Principal, name: str, text: str, *, source: str,
        tenant: str | None = None, run_roles: Sequence[str] | None = None,
        description: str | None = None) -> TemplateAdded:
    """Add template ``name`` (version 1), or its next version when ``text`` says something
    else than the newest; ``run_roles``/``description`` None: unchanged."""
    from scheduler.record.session import transaction
    from scheduler.templates.store import add_template

    with stores.database() as engine, transaction(engine) as session:
        done = add_template(session, name, text, operator=principal, source=source,
                            tenant=tenant, run_roles=run_roles, description=description)
    return TemplateAdded(**done, by=principal.name)


def remove(stores: Stores, principal: Principal, name: str) -> int:
    """Remove template ``name`` (refused while a schedule fires it); its tasks keep their
    record. Returns how many versions it had."""
    from scheduler.record.session import transaction
    from scheduler.templates.store import remove_template

    with stores.database() as engine, transaction(engine) as session:
        return remove_template(session, name, operator=principal)


def list_(stores: Stores, *, tenant: str | None = None) -> list[dict[str, Any]]:
    """The templates ``tenant`` sees (None: every one), columns ``store.LIST_COLUMNS``."""
    from scheduler.templates.store import list_templates

    with stores.reading() as session:
        return list_templates(session, tenant)


def show(stores: Stores, name: str, *, version: int | None = None,
         tenant: str | None = None) -> dict[str, Any]:
    """One template: a version's file and parameters, roles, versions, last runs."""
    from scheduler.templates.store import show_template

    with stores.reading() as session:
        return show_template(session, name, version=version, tenant=tenant)


def run(stores: Stores, principal: Principal, ref: str, values: Mapping[str, Any], *,
        version: int | None = None, dry_run: bool = False,
        confirm: Callable[[Plan], None] | None = None,
        request_key: str | None = None) -> Submission:
    """Run template ``ref`` (``NAME`` or ``NAME@N``) with ``values`` through ``submit``."""
    from scheduler.templates.store import check_plan, run_request
    from scheduler.verbs.submit import submit

    with stores.reading() as session:
        request = run_request(session, ref, values, principal=principal, version=version)

    def checked(plan: Plan) -> None:
        with stores.reading() as session:
            check_plan(session, request, plan)
        if confirm is not None:
            confirm(plan)

    done = submit(stores, principal, request, dry_run=dry_run, confirm=checked,
                  request_key=request_key)
    if dry_run and done.plan is not None:  # a dry run stops before the confirmation
        with stores.reading() as session:
            check_plan(session, request, done.plan)
    return done
