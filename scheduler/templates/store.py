"""Saved job templates in the record: add (a new version when the file changed), list, show,
remove, and the task request of a run.

1. ``add_template`` checks the file (``templates.spec.load_template``), then writes version 1,
   or the next version when what the file says changed (same file: no version, ``changed``
   False); the roles that may run it and its customer are the template's, not a version's;
   a ``template-add`` event names the principal. Changing an existing template: the principal
   must be allowed to run it, only an admin changes its run roles, and a customer's template
   is changed naming its customer (``_check_change``).
2. Reads take the reader's tenant: a customer's principal sees its own templates only, and
   another's (or the team's) is not found, as if it did not exist (``scheduler.record.tenancy``).
3. ``run_request`` is a run's request: the template visible to the principal, its role allowed
   (``check_runner``), the version (the newest unless pinned), the values typed and filled in;
   the request names the template and version, which ``record_task`` keeps on the task and in
   its ``submit`` event. A customer's template (or a customer's principal) resolves its target
   against that customer's hosts only (``submission.submit.plan_task``); ``check_plan`` checks.
4. ``remove_template`` refuses while a schedule fires the template; the tasks run from it keep
   its name and version.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import ForbiddenError, NotFoundError, ValidationError
from scheduler.principal import Principal
from scheduler.record.audit import record_event
from scheduler.record.models import Host, Schedule, Task, Template, TemplateVersion
from scheduler.templates.spec import (
    Declared,
    TemplateFile,
    digest,
    load_template,
    render,
    typed_values,
)

if TYPE_CHECKING:
    from scheduler.submission.submit import Plan, TaskRequest

__all__ = ["LIST_COLUMNS", "MAX_VERSION", "add_template", "check_plan", "check_runner",
           "check_version", "list_templates", "parse_ref", "remove_template", "run_request",
           "schedules_of", "show_template"]

LIST_COLUMNS = ["name", "version", "action", "parameters", "run_roles", "tenant", "last_run"]
LAST_RUNS = 10
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # as a schedule's name
MAX_VERSION = 2**31 - 1  # template_versions.version and tasks.template_version: INTEGER
NAME_HINT = "1-64 letters, digits, '-' or '_', starting with a letter or digit"


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValidationError(f"template name {name!r} must be {NAME_HINT}")
    return name


def check_version(version: int | None, what: str = "version") -> int | None:
    """``version`` if a version may be it (1 to MAX_VERSION, the column's integer), else one
    line (a huge one never reaches SQL, where it would overflow)."""
    if version is not None and not (isinstance(version, int) and 1 <= version <= MAX_VERSION):
        raise ValidationError(f"{what} {version} is not a version: a number from 1 to "
                              f"{MAX_VERSION}")
    return version


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``NAME`` (the newest version at each use) or ``NAME@N`` (version N pinned)."""
    name, at, version = ref.partition("@")
    if at and not (version.isascii() and version.isdigit() and len(version) <= 10
                   and 1 <= int(version) <= MAX_VERSION):
        raise ValidationError(f"template {ref[:80]!r}: the version after @ is a number from 1 "
                              f"to {MAX_VERSION}", hint="e.g. restart-service@3")
    return _check_name(name), int(version) if at else None


def _check_roles(roles: Sequence[str]) -> list[str]:
    from scheduler.access.roles import ROLES

    for role in roles:
        if role not in ROLES:
            raise ValidationError(f"--run-role {role!r} is not a role "
                                  f"({', '.join(sorted(ROLES))})")
        if "templates.run" not in ROLES[role]:
            raise ValidationError(f"--run-role {role}: that role may not run templates at all",
                                  hint="roles that may: " + ", ".join(
                                      sorted(r for r, v in ROLES.items() if "templates.run" in v)))
    return sorted(set(roles))


def _row(session: Session, name: str, tenant: str | None) -> Template:
    row = session.scalars(sa.select(Template).where(Template.name == name)).first()
    if row is None or (tenant is not None and row.tenant != tenant):
        raise NotFoundError(f"no template named {name!r}",
                            hint="see `fleetsched templates list`")
    return row


def _version(session: Session, row: Template, version: int | None) -> TemplateVersion:
    v = check_version(version) or row.version
    found = session.scalars(sa.select(TemplateVersion).where(
        TemplateVersion.template_id == row.id, TemplateVersion.version == v)).first()
    if found is None:
        raise NotFoundError(f"template {row.name} has no version {v} (the newest is "
                            f"{row.version})", hint=f"see `fleetsched templates show {row.name}`")
    return found


def add_template(session: Session, name: str, text: str, *, operator: Principal | str,
                 source: str, tenant: str | None = None, run_roles: Sequence[str] | None = None,
                 description: str | None = None) -> dict[str, Any]:
    """Add template ``name`` from ``text`` or a new version of it (see the module docstring)."""
    from scheduler.inventory.validate import tenant as valid_tenant

    _check_name(name)
    if tenant is not None:
        try:
            valid_tenant(tenant)
        except ValueError as exc:
            raise ValidationError(str(exc).replace("fleetsched_tenant", "--tenant")) from None
    roles = None if run_roles is None else _check_roles(run_roles)
    file = load_template(text, source)  # one line for a bad file, before anything is read
    said = digest(text)
    principal = operator if isinstance(operator, Principal) else None
    scoped = principal.tenant if principal is not None else None
    if scoped is not None:  # a customer's principal adds its own customer's templates only
        if tenant is not None and tenant != scoped:
            raise ForbiddenError(f"a token of {scoped}'s adds {scoped}'s templates only, "
                                 f"not --tenant {tenant}")
        tenant = scoped
    row = session.scalars(sa.select(Template).where(Template.name == name)).first()
    if row is not None:
        _check_change(row, principal, tenant, roles)
    created = row is None
    if row is None:
        row = Template(name=name, tenant=tenant, run_roles=roles or [], version=0,
                       description=description, created_by=str(operator))
        session.add(row)
        session.flush()
    newest = None if created else _version(session, row, None)
    changed = newest is None or newest.digest != said
    if changed:
        row.version += 1
        session.add(TemplateVersion(template_id=row.id, version=row.version, text=text,
                                    parameters=[p.as_dict() for p in file.params], digest=said,
                                    created_by=str(operator)))
    roles_changed = roles is not None and roles != list(row.run_roles or [])
    if roles_changed:
        row.run_roles = roles
    if description is not None and description != row.description:
        row.description, roles_changed = description, True
    session.flush()
    record_event(session, "template-add", operator=operator, data={
        "template": name, "version": row.version, "new_version": changed,
        "run_roles": list(row.run_roles or []), "tenant": row.tenant})
    return {"name": name, "version": row.version, "created": created, "changed": changed,
            "settings_changed": roles_changed, "run_roles": list(row.run_roles or []),
            "tenant": row.tenant, "parameters": [p.name for p in file.params]}


def _is_admin(principal: Principal | None) -> bool:
    return principal is None or principal.role is None or principal.role == "admin"


def _check_change(row: Template, principal: Principal | None, tenant: str | None,
                  roles: list[str] | None) -> None:
    """Who may add to an existing template (docs/guides/templates.md, "Who may change it"):
    another customer's (or, for a customer, the team's) name is taken, whoever holds it; a
    customer's template is changed only naming its customer (``--tenant``), and its tenant
    never changes; a version is added only by a principal that may run the template; its
    run roles are changed by an admin only (the local CLI is one)."""
    scoped = principal.tenant if principal is not None else None
    if scoped is not None and row.tenant != scoped:
        raise ValidationError(f"template name {row.name!r} is taken",
                              hint="add it under another name")
    if tenant != row.tenant:
        if row.tenant is None:
            raise ValidationError(f"template {row.name} is the team's; a template's tenant "
                                  "does not change", hint="add it under another name")
        raise ValidationError(f"template {row.name} is {row.tenant}'s: add its versions with "
                              f"--tenant {row.tenant} (a template's tenant does not change)")
    check_runner(row, principal)
    if roles is not None and roles != list(row.run_roles or []) and not _is_admin(principal):
        raise ForbiddenError(f"template {row.name}: changing who may run it (--run-role) "
                             f"needs the admin role, not {getattr(principal, 'role', None)}",
                             hint="add the file without --run-role to add a version")


def check_runner(row: Template, principal: Principal | None) -> None:
    """Refuse (403) a principal whose role the template does not name; an admin, and the local
    CLI (no role), may run every template."""
    from scheduler.access.roles import ROLES

    if _is_admin(principal):
        return
    assert principal is not None and principal.role is not None
    if "templates.run" not in ROLES.get(principal.role, frozenset()):
        raise ForbiddenError(f"role {principal.role} may not run templates",
                             hint="ask for a token with a role that may (operator, admin)")
    roles = list(row.run_roles or [])
    if roles and principal.role not in roles:
        raise ForbiddenError(f"template {row.name} may be run by role(s) {', '.join(roles)}, "
                             f"not {principal.role}",
                             hint="ask for a token with one of them, or an admin to add yours "
                                  f"(`fleetsched templates add {row.name} --run-role ...`)")


def run_request(session: Session, ref: str, given: Mapping[str, Any], *,
                principal: Principal | None, version: int | None = None) -> TaskRequest:
    """The task request of one run of template ``ref`` (``NAME`` or ``NAME@N``) with the
    values ``given`` (text as typed, or JSON values); see the module docstring, 3."""
    name, pinned = parse_ref(ref)
    check_version(version)
    if pinned is not None and version is not None and pinned != version:
        raise ValidationError(f"template {ref}: --version {version} names another version")
    row = _row(session, name, principal.tenant if principal is not None else None)
    check_runner(row, principal)
    found = _version(session, row, pinned or version)
    where = f"template {name} v{found.version}"
    file = TemplateFile(text=found.text, spec=load_template(found.text, where).spec,
                        params=tuple(Declared.from_dict(d) for d in found.parameters or []))
    values = typed_values(file, given, f"template {name}")
    request = render(file, values, where)
    return dataclasses.replace(request, template=name, template_version=found.version)


def check_plan(session: Session, request: TaskRequest, plan: Plan) -> None:
    """A customer's template runs on that customer's hosts only. ``plan_task`` resolves its
    target against them alone (another's host, group or value is as one that does not exist);
    this is the last word should a host change hands between the plan and now, and it names
    neither how many nor which (nothing is written)."""
    if request.template is None:
        return
    tenant = session.scalar(sa.select(Template.tenant).where(Template.name == request.template))
    if tenant is None:
        return
    names = [h.name for h in plan.hosts]
    theirs = set(session.scalars(sa.select(Host.name).where(
        Host.name.in_(names), Host.tenant == tenant))) if names else set()
    if any(n not in theirs for n in names):
        raise ValidationError(f"template {request.template} is {tenant}'s: its target selects "
                              f"a host that is not {tenant}'s now", hint="plan it again")


def schedules_of(session: Session, name: str) -> list[str]:
    """The schedules that fire template ``name``."""
    return sorted(s.name for s in session.scalars(sa.select(Schedule))
                  if ((s.options or {}).get("template") or {}).get("name") == name)


def remove_template(session: Session, name: str, *, operator: Principal | str) -> int:
    """Remove template ``name`` and its versions; returns how many versions it had."""
    row = _row(session, name, None)
    using = schedules_of(session, name)
    if using:
        raise ValidationError(f"template {name} is fired by schedule(s) {', '.join(using)}",
                              hint=f"remove them first: fleetsched schedules remove {using[0]}")
    versions = row.version
    session.delete(row)
    session.flush()
    record_event(session, "template-remove", operator=operator,
                 data={"template": name, "versions": versions})
    return versions


# ------------------------------------------------------------------------------ reading


def _last_runs(session: Session, row: Template, limit: int) -> list[dict[str, Any]]:
    """This template's runs, newest first: the tasks named after it since it was added, so a
    template removed and added again (under another tenant, say) shows none of the old one's."""
    from scheduler.progress import from_task_row

    t = Task.__table__
    rows = session.execute(sa.select(t).where(t.c.template == row.name,
                                              t.c.created_at >= row.created_at)
                           .order_by(t.c.id.desc()).limit(limit))
    return [{"task": r.id, "version": r.template_version, "operator": r.operator,
             "created_at": r.created_at, "state": from_task_row(r).counts()["state"],
             "total": r.total, "succeeded": r.succeeded, "failed": r.failed}
            for r in rows]


def list_templates(session: Session, tenant: str | None = None) -> list[dict[str, Any]]:
    """Every template the reader sees (a customer: its own), by name."""
    q = sa.select(Template).order_by(Template.name)
    if tenant is not None:
        q = q.where(Template.tenant == tenant)
    out = []
    for row in session.scalars(q):
        newest = _version(session, row, None)
        last = _last_runs(session, row, 1)
        out.append({"name": row.name, "version": row.version,
                    "action": _action(newest.text), "parameters": ", ".join(
                        d["name"] for d in newest.parameters or []),
                    "run_roles": ", ".join(row.run_roles or []) or "(any that may run)",
                    "tenant": row.tenant, "last_run": last[0]["created_at"] if last else None})
    return out


def _action(text: str) -> str | None:
    import yaml

    try:
        said = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return said.get("action") if isinstance(said, dict) else None


def show_template(session: Session, name: str, *, version: int | None = None,
                  tenant: str | None = None, limit: int = LAST_RUNS) -> dict[str, Any]:
    """One template: the version asked (the newest by default) with its file and parameters,
    who may run it, every version, and its last runs (any version)."""
    row = _row(session, name, tenant)
    shown = _version(session, row, version)
    versions = [{"version": v.version, "created_by": v.created_by, "created_at": v.created_at}
                for v in session.scalars(sa.select(TemplateVersion).where(
                    TemplateVersion.template_id == row.id)
                    .order_by(TemplateVersion.version.desc()))]
    return {"name": row.name, "version": shown.version, "newest": row.version,
            "tenant": row.tenant, "run_roles": list(row.run_roles or []),
            "description": row.description, "created_by": row.created_by,
            "created_at": row.created_at, "schedules": schedules_of(session, name),
            "parameters": list(shown.parameters or []), "file": shown.text,
            "versions": versions, "runs": _last_runs(session, row, limit)}
