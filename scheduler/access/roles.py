"""The roles of API principals: role -> the verbs it may call, as one table in code.

A verb is named ``noun.verb`` as the CLI spells it (``tasks.cancel``, ``windows.approve``).
A principal without a role is the local CLI (direct mode: whoever holds the database and Redis
credentials), which may do everything, as before tokens existed.
"""

from __future__ import annotations

from scheduler.errors import ForbiddenError
from scheduler.principal import Principal

__all__ = ["CUSTOMER_ROLES", "ROLES", "TENANT_FILTERED", "check_role"]

READ = frozenset({
    "status", "tasks.list", "tasks.show", "tasks.jobs", "tasks.watch", "tasks.output",
    "jobs.show", "hosts.list", "hosts.show", "hosts.history", "groups.list", "windows.list",
    "windows.show", "windows.next", "status.followers", "top",
    "schedules.list", "schedules.show", "schedules.next", "report", "tenants.list",
    "templates.list", "templates.show"})
CONTROL = frozenset({
    "tasks.submit", "tasks.cancel", "tasks.pause", "tasks.resume", "tasks.continue",
    "tasks.retry-failed", "tasks.reprioritize",
    "templates.add", "templates.remove", "templates.run"})
WINDOWS = frozenset({
    "windows.add", "windows.assign", "windows.unassign", "windows.approve", "windows.deny",
    "windows.revoke", "windows.edit", "windows.freeze", "windows.remove",
    "schedules.add", "schedules.pause", "schedules.resume", "schedules.remove"})
ADMIN = frozenset({
    "tokens.create", "tokens.list", "tokens.revoke", "hosts.import", "hosts.add",
    "hosts.remove", "hosts.check", "hosts.export", "groups.remove", "groups.limit",
    "tenants.set"})
CUSTOMER_READ = frozenset({
    "status", "tasks.list", "tasks.show", "tasks.jobs", "tasks.watch", "tasks.output",
    "jobs.show",
    "hosts.list", "hosts.show", "hosts.history", "windows.list", "windows.show",
    "windows.next", "templates.list", "templates.show"})

ROLES: dict[str, frozenset[str]] = {
    "viewer": READ,
    "operator": READ | CONTROL,
    "window-admin": READ | WINDOWS,
    "admin": READ | CONTROL | WINDOWS | ADMIN,
    "customer-viewer": CUSTOMER_READ,
    "customer-approver": CUSTOMER_READ | {"windows.approve", "windows.deny", "windows.revoke",
                                          "windows.freeze"},
}
CUSTOMER_ROLES = frozenset({"customer-viewer", "customer-approver"})

# The verbs whose reads filter by the principal's tenant, in SQL (scheduler.record.tenancy;
# another customer's object is not found): a tenant-scoped principal may call these and no
# other, whatever its role, since any other verb would show it every customer's rows.
# Of its own jobs, a customer reads the output only where the task says so
# (scheduler.record.tenancy.output_shown); tasks.watch streams its own hosts' events only.
TENANT_FILTERED = frozenset({
    "status", "tasks.list", "tasks.show", "tasks.jobs", "tasks.watch", "tasks.output",
    "jobs.show",
    "hosts.list", "hosts.show", "hosts.history", "windows.list", "windows.show",
    "windows.next"})

# A window decision is the principal's own party's: another customer's window is not found
# (scheduler.windows.approvals).
TENANT_FILTERED |= {"windows.approve", "windows.deny", "windows.revoke", "windows.freeze"}

# A customer's templates only (scheduler.templates.store); a run of one plans that customer's
# hosts only, so a token scoped to it with a role that may run templates (an operator) may.
TENANT_FILTERED |= {"templates.list", "templates.show", "templates.run"}


def check_role(principal: Principal, verb: str) -> None:
    """Raise ``ForbiddenError`` unless ``principal`` may call ``verb``."""
    if principal.role is None:
        return
    if verb not in ROLES.get(principal.role, frozenset()):
        raise ForbiddenError(f"role {principal.role} may not call {verb}",
                             hint="ask an administrator for a token with a role that may")
    if principal.tenant is not None and verb not in TENANT_FILTERED:
        raise ForbiddenError(f"{verb} is not filtered by tenant yet, so a token scoped to "
                             f"tenant {principal.tenant} may not call it",
                             hint="use a token without a tenant")
