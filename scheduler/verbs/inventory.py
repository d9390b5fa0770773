"""The inventory's verbs: hosts import (of a file, or of text: ``import_text``), add, remove
and check; groups remove and limit; and the reads: hosts list, show, history, windows and
export, groups list.

1. Each change is written to the record by ``scheduler.inventory`` as the principal's.
2. Then the queue follows it: a P% group limit follows its group's size and a removed group's
   limit goes (``submission.group_limits.push``), a host that joined a frozen group holds its
   queued jobs (``windows.freezes.push_or_warn``), a removed host's connection data leaves
   every shard (``inventory.queue_copies``). Redis being down is not a failure of the verb:
   the record is right, and the result's ``notes`` say what Redis did not take.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler.errors import ValidationError
from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from scheduler.health.hostcheck import Probe
    from scheduler.inventory import Export, ImportResult

__all__ = ["Changed", "Checked", "Imported", "Limited", "add_host", "check_hosts",
           "export_hosts", "host_history", "host_windows", "import_hosts", "import_text",
           "limit_group", "list_groups", "list_hosts", "remove_group", "remove_host",
           "show_host"]


@dataclass(frozen=True)
class Changed:
    """An inventory change: ``count`` (hosts in a removed group, ...), the groups it created,
    and the lines saying what Redis did or did not take."""

    count: int = 0
    created: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Imported:
    """What an import did (a dry run: would do), as the CLI prints it and the API answers it:
    the source it is recorded under (``path``: the file as named, or ``api:NAME``), the counts,
    one row per host changed (``change``, ``host``, ``details``, and an update's ``fields``),
    the groups changed, the secret variables skipped, the source's hosts per customer; and
    ``notes``, the lines about Redis."""

    path: str
    format: str
    dry_run: bool
    prune: bool
    counts: dict[str, int]
    changes: list[dict[str, Any]]
    groups: dict[str, list[str]]
    skipped_secrets: list[str]
    tenants: dict[str, int]
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, result: ImportResult, notes: list[str]) -> Imported:
        plan = result.plan
        return cls(path=result.path, format=result.format, dry_run=result.dry_run,
                   prune=result.prune, counts=plan.counts(), changes=_change_rows(plan),
                   groups={"added": plan.groups_added, "updated": plan.groups_updated,
                           "removed": plan.groups_removed},
                   skipped_secrets=list(plan.skipped_secrets), tenants=dict(plan.tenants),
                   notes=notes)

    def as_dict(self) -> dict[str, Any]:
        """Everything but the notes (``hosts import -o json``)."""
        return {k: v for k, v in asdict(self).items() if k != "notes"}


def import_hosts(stores: Stores, principal: Principal, path: Path, *, fmt: str | None = None,
                 prune: bool = False, dry_run: bool = False) -> Imported:
    """Add and update hosts and groups from an Ansible inventory file, matched by name."""
    from scheduler.inventory import import_inventory, load_inventory

    # Parse before touching the database: a bad file fails fast and opens nothing.
    inventory = load_inventory(path, fmt)
    notes: list[str] = []
    with stores.database() as engine:
        result = import_inventory(engine, path, operator=principal, prune=prune,
                                  dry_run=dry_run, inventory=inventory)
        if not dry_run:
            notes += _push_limits(stores, engine, principal,
                                  always=bool(result.plan.groups_removed))
            notes += _push_freezes(stores, engine)  # a host may have joined a frozen group
    return Imported.of(result, notes)


TEXT_MAX_BYTES = 1024 * 1024  # an inventory sent as text: the HTTP API's body limit too
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def import_text(stores: Stores, principal: Principal, text: str, *, name: str,
                fmt: str | None = None, prune: bool = False, dry_run: bool = False) -> Imported:
    """``import_hosts`` of an inventory sent as text under ``name`` (the HTTP API's import):
    the same refusals and parser as a file's (``source.decode_text``, ``parse_inventory``),
    at most ``TEXT_MAX_BYTES``; its hosts' source is ``api:<name>``, so ``prune`` removes
    only what that name imported before."""
    from scheduler.inventory.service import import_named
    from scheduler.inventory.source import FORMATS, decode_text, parse_inventory

    if not NAME.fullmatch(name):
        raise ValidationError(f"name {name[:120]!r} is not an inventory name",
                              hint="letters, digits, '.', '_' and '-', at most 100, e.g. "
                                   "cmdb.ini")
    if fmt is not None and fmt not in FORMATS:
        raise ValidationError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    # Parse before touching the database, as a file is: bad text fails fast, opens nothing.
    inventory = parse_inventory(decode_text(text.encode(), name, max_bytes=TEXT_MAX_BYTES),
                                name, fmt)
    with stores.database() as engine:
        result = import_named(engine, name, inventory, operator=principal, prune=prune,
                              dry_run=dry_run)
        notes = [] if dry_run else (
            _push_limits(stores, engine, principal, always=bool(result.plan.groups_removed))
            + _push_freezes(stores, engine))  # a host may have joined a frozen group
    return Imported.of(result, notes)


def add_host(stores: Stores, principal: Principal, name: str, *, address: str | None = None,
             port: int | None = None, user: str | None = None, groups: list[str] | None = None,
             host_vars: dict[str, Any] | None = None) -> Changed:
    """Add one host by hand (an import never prunes it)."""
    from scheduler.inventory import add_host as add
    from scheduler.record.session import transaction

    notes: list[str] = []
    with stores.database() as engine:
        with transaction(engine) as session:
            created = add(session, name, address=address, port=port, user=user,
                          groups=groups or [], host_vars=host_vars or {},
                          operator=principal)
        if groups:
            notes += _push_limits(stores, engine, principal)  # it may count in a limit now
            notes += _push_freezes(stores, engine)  # or be in a frozen group
    return Changed(created=list(created or []), notes=notes)


def remove_host(stores: Stores, principal: Principal, name: str) -> Changed:
    """Remove one host, its memberships, and its connection data in every shard (a job of it
    still queued then fails at its claim: the host is unknown)."""
    import redis

    from scheduler.errors import FleetschedError
    from scheduler.inventory import remove_host as remove
    from scheduler.inventory.queue_copies import drop_host
    from scheduler.record.session import transaction

    notes: list[str] = []
    with stores.database() as engine:
        with transaction(engine) as session:
            open_jobs = _open_jobs(session, name)
            remove(session, name, operator=principal)
        if open_jobs:
            tasks = ", ".join(sorted(open_jobs, key=int))
            count = sum(open_jobs.values())
            notes.append(f"warning: {name} had {count} job(s) not ended yet (task(s) {tasks}): "
                         "each fails at its claim (the host is unknown); `fleetsched tasks "
                         "cancel TASK` ends a task's jobs instead")
        try:
            client = stores.connect()
            try:
                drop_host(client, stores.shards, name)
            finally:
                client.close()
        except (FleetschedError, redis.RedisError, OSError) as exc:
            notes.append(f"warning: removed from the record, but Redis did not answer "
                         f"({str(exc).splitlines()[0]}): its copy of the host's connection "
                         "data stays there; no new task can target the host")
        notes += _push_limits(stores, engine, principal)  # a P% limit of its groups follows
        notes += _push_freezes(stores, engine)
    return Changed(notes=notes)


def _open_jobs(session: Any, host: str) -> dict[str, int]:
    """The host's jobs the record has not seen end, counted by task id."""
    import sqlalchemy as sa

    from scheduler.record.models import JOB_FINAL_STATES, Job

    rows = session.execute(sa.select(Job.task_id, sa.func.count()).where(
        Job.host == host, Job.state.not_in(JOB_FINAL_STATES)).group_by(Job.task_id)).all()
    return {str(task): int(n) for task, n in rows}


def remove_group(stores: Stores, principal: Principal, name: str) -> Changed:
    """Remove a group (its hosts stay); ``count``: the hosts that were in it."""
    from scheduler.inventory import group_limits
    from scheduler.inventory import remove_group as remove
    from scheduler.record.session import transaction

    with stores.database() as engine:
        with transaction(engine) as session:
            limited = name in group_limits(session)
            hosts = remove(session, name, operator=principal)
        notes = _push_limits(stores, engine, principal, always=limited)  # its limit goes too
        notes += _push_freezes(stores, engine)
    return Changed(count=hosts, notes=notes)


@dataclass(frozen=True)
class Limited:
    """A group's limit now (None: no limit), its member hosts, and by whom."""

    count: int | None
    members: list[str]
    by: str


def limit_group(stores: Stores, principal: Principal, name: str,
                max_busy: str | None) -> Limited:
    """Set (N or P%) or remove (None) a group's limit across all tasks, in the record and then
    in the queue (Redis down: the error, after the record)."""
    from scheduler.inventory import set_group_limit
    from scheduler.record.session import transaction
    from scheduler.submission import group_limits

    if max_busy is not None:  # a bad value is refused before anything is written
        from scheduler.parse import parse_limit

        max_busy = str(parse_limit(max_busy, "--max-busy"))  # as SQL keeps it: " 5" -> "5"
    with stores.database() as engine:
        with transaction(engine) as session:
            count, members = set_group_limit(session, name, max_busy, operator=principal)
        with stores.queue(coord=True) as queue:
            group_limits.push(engine, queue, principal.name, shards=stores.shards)
    return Limited(count=count, members=list(members), by=principal.name)


# A check made while an HTTP request waits (the API's, a page at a time in remote mode): at
# most CHECK_MAX hosts, CHECK_CONCURRENCY_MAX at a time, each within CHECK_TIMEOUT_MAX seconds.
CHECK_MAX = 200
CHECK_CONCURRENCY_MAX = 50
CHECK_TIMEOUT_MAX = 30.0


@dataclass(frozen=True)
class Checked:
    """Each host's probe, and the counts by status (``hostcheck.summarize``)."""

    probes: list[Probe]
    counts: dict[str, int]
    selected: int = 0  # the hosts the target selects (``probes``: a page of them, if asked)
    known_hosts: str = ""  # the host keys checked against (the checking side's settings)


def check_hosts(stores: Stores, target: str, *, options: dict[str, Any], concurrency: int,
                timeout_s: float, become_user: str | None = None, note: Any = None,
                limit: int | None = None, offset: int = 0) -> Checked:
    """Check SSH to the ``target`` hosts as the workers would; strict: never adds a host key.
    ``limit`` and ``offset``: only that page of them, by name (the HTTP API checks a page per
    request). ``note`` gets the line saying how many hosts are checked, before they are."""
    from scheduler.health.hostcheck import check_hosts as check
    from scheduler.health.hostcheck import select_hosts, summarize

    if timeout_s <= 0:
        raise ValidationError("--timeout must be more than 0s")
    options = dict(options)
    if become_user:
        from tasks.executors.ssh.become import USER_HINT, is_user_name

        if not is_user_name(become_user):
            raise ValidationError(f"--become-user {become_user!r} is not a user name",
                                  hint=USER_HINT)
        options["become_user"] = become_user
    with stores.database() as engine:
        selected = select_hosts(engine, target)
    hosts = selected[offset:None if limit is None else offset + limit]
    if note is not None:
        note(f"checking {len(hosts)} host(s), {min(concurrency, len(hosts))} at a time")
    probes = check(hosts, stores.settings, options=options, concurrency=concurrency,
                   timeout=timeout_s)
    return Checked(probes=probes, counts=summarize(probes), selected=len(selected),
                   known_hosts=str(stores.settings.known_hosts))


def list_hosts(stores: Stores, *, group: str | None = None, match: str | None = None,
               limit: int | None = None, offset: int = 0, tenant: str | None = None,
               host_vars: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Hosts sorted by name: all, those of ``group`` (child groups included), those whose
    name matches the pattern ``match``, those whose variables hold ``host_vars`` (values as
    text) (``inventory.list_hosts``); ``limit`` of them from ``offset``, one page read in SQL
    (``inventory.list_hosts`` says when not); ``tenant``: that customer's only."""
    from scheduler.inventory import list_hosts as read

    with stores.reading() as session:
        return read(session, group=group, match=match, limit=limit, offset=offset,
                    tenant=tenant, host_vars=host_vars)


def show_host(stores: Stores, name: str, *, tenant: str | None = None) -> dict[str, Any]:
    """One host: address, port, user, groups, variables, tenant, source (``NotFoundError`` if
    none, or with ``tenant`` if it is another customer's)."""
    from scheduler.inventory import show_host as read

    with stores.reading() as session:
        return read(session, name, tenant=tenant)


def host_history(stores: Stores, name: str, *, limit: int = 1000, offset: int = 0,
                 tenant: str | None = None) -> list[dict[str, Any]]:
    """Every recorded event of host ``name``, oldest first, at most the newest ``limit`` after
    the newest ``offset`` (``reports.event_trail``; its columns: ``reports.TRAIL_COLUMNS``);
    ``tenant``: only a host of that customer, and its jobs' events run as that customer's."""
    from scheduler.reports import event_trail

    with stores.database() as engine:
        return event_trail(engine, host=name, limit=limit, offset=offset, tenant=tenant)


def host_windows(stores: Stores, name: str) -> list[dict[str, Any]]:
    """The service windows and freezes that hold host ``name``'s jobs now, as submit applies
    them (``windows.assignment.effective``: its windows from one source, every freeze), each
    with its next opening in UTC (None: no more). Call ``show_host`` first for a customer:
    this reads no tenant."""
    from scheduler.calendar.windows import upcoming
    from scheduler.record.types import utcnow
    from scheduler.windows.assignment import effective

    with stores.reading() as session:
        eff = effective(session, [name])[name]
    now = utcnow()
    rows = []
    for kind, windows in (("window", eff.windows), ("freeze", eff.freezes)):
        for window in windows:
            following = upcoming(window, now, 1)
            rows.append({"name": window.name, "kind": kind, "source": eff.source,
                         "approved": window.approved,
                         "next_open_utc": following[0].start_utc if following else None,
                         "next_close_utc": following[0].end_utc if following else None})
    return rows


def export_hosts(stores: Stores, target: str = "all") -> Export:
    """The ``target`` hosts (as for submit; ``all``: every host), their groups and variables,
    as ``inventory.render_export`` writes them out as an Ansible inventory."""
    from scheduler.inventory import read_export
    from scheduler.record.session import transaction

    with stores.database() as engine:
        chosen = None
        if target != "all":
            from scheduler.health.hostcheck import select_hosts

            chosen = [host.name for host in select_hosts(engine, target)]
        with transaction(engine, commit=False) as session:
            return read_export(session, chosen)


def list_groups(stores: Stores) -> list[dict[str, Any]]:
    """Groups sorted by name, with their limit, direct and total host counts, children,
    parents, source and variables (``inventory.list_groups``)."""
    from scheduler.inventory import list_groups as read

    with stores.reading() as session:
        return read(session)


def _push_limits(stores: Stores, engine: Engine, principal: Principal, *,
                 always: bool = False) -> list[str]:
    """After the inventory changed: group limits to Redis (``group_limits.push``), only when a
    group has a limit or ``always``; Redis being down is one warning line."""
    import redis

    from scheduler.errors import FleetschedError
    from scheduler.inventory import group_limits as limits_in_sql
    from scheduler.queue.client import Queue
    from scheduler.record.session import transaction
    from scheduler.submission import group_limits

    with transaction(engine, commit=False) as session:
        if not limits_in_sql(session) and not always:
            return []
    try:
        client = stores.connect()
        shards = stores.shards
        queue = Queue(client, shards.coord)
        try:
            changed = group_limits.push(engine, queue, principal.name, shards=shards)
        finally:
            queue.close()
            client.close()
    except (redis.RedisError, OSError, FleetschedError) as exc:
        return [f"warning: group limits not updated in Redis ({type(exc).__name__}): run "
                "`fleetsched reconcile` when it is back"]
    return [f"group limits: {changed} updated in Redis"] if changed else []


def _push_freezes(stores: Stores, engine: Engine) -> list[str]:
    """After the inventory changed: the hosts' freezes to Redis, only when a freeze exists;
    and the windows that may need an approval, whose parties (the owners of the hosts they
    cover) may have changed with it."""
    from scheduler.windows.freezes import push_or_warn
    from scheduler.windows.store import copy_windows_awaiting

    warning = (push_or_warn(engine, stores.connect, stores.shards, if_any=True)
               or copy_windows_awaiting(engine, stores.connect, stores.shards))
    return [f"warning: {warning}"] if warning else []


def _short(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def _describe_change(key: str, old: Any, new: Any) -> str:
    if key == "vars" and isinstance(old, dict) and isinstance(new, dict):
        added = sorted(set(new) - set(old))
        removed = sorted(set(old) - set(new))
        changed = sorted(k for k in set(old) & set(new) if old[k] != new[k])
        parts = [f"+{k}" for k in added] + [f"-{k}" for k in removed] + [f"~{k}" for k in changed]
        return "vars: " + " ".join(parts)
    if key in ("groups", "children"):
        return f"{key}: {','.join(old) or '-'} -> {','.join(new) or '-'}"
    return f"{key}: {_short(old) or '-'} -> {_short(new) or '-'}"


def _change_rows(plan: Any) -> list[dict[str, Any]]:
    """One row per host an import added, updated, removed or left (what it would do), and one
    per group it updated (``host`` ``group:NAME``)."""
    rows: list[dict[str, Any]] = []
    for r in plan.added:
        where = r.address or r.name
        rows.append({"change": "added", "host": r.name,
                     "details": (f"[{where}]" if ":" in where else where) + f":{r.port}"
                                + (f" as {r.user}" if r.user else "")
                                + (f" in {','.join(r.groups)}" if r.groups else "")})
    for c in plan.updated:
        rows.append({"change": "updated", "host": c.name, "fields": sorted(c.changes),
                     "details": "; ".join(_describe_change(k, *v)
                                          for k, v in sorted(c.changes.items()))})
    # an updated group's own changes (a second import that drops a group's variables says
    # so here, beside the hosts whose variables they were)
    for name in plan.groups_updated:
        changes = plan.group_changes.get(name, {})
        rows.append({"change": "updated", "host": f"group:{name}", "fields": sorted(changes),
                     "details": "; ".join(_describe_change(k, *v)
                                          for k, v in sorted(changes.items()))})
    rows += [{"change": "removed", "host": n, "details": ""} for n in plan.removed]
    rows += [{"change": "left", "host": n, "details": "no longer in the source; kept "
                                                     "(--prune removes it)"} for n in plan.left]
    return rows
