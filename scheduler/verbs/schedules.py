"""The recurring schedules' verbs: add, pause, resume, remove; list, show, next.

1. ``add`` checks the schedule's task as ``submit`` would plan it, records the schedule as the
   principal's (``schedule-add``) and arms its first occurrence in the queue's shard 0; the
   workers fire it (no leader process).
2. ``pause`` disarms it, ``resume`` records the occurrences that fell meanwhile as missed and
   arms the next one (or re-arms a schedule Redis lost), ``remove`` drops it (its tasks stay,
   with their record); each event names the principal.
3. An ``add`` or ``resume`` the record took but Redis did not is
   ``schedules.store.NotArmedError`` (after the record). ``pause`` and ``remove`` need no
   Redis: a firing worker sees the schedule paused (the occurrence is recorded as missed) or
   gone (the entry is dropped).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from scheduler.schedules.store import ScheduleSpec

__all__ = ["ScheduleAdded", "ScheduleChange", "add", "list_", "next_", "pause", "remove",
           "resume", "show"]


@dataclass(frozen=True)
class ScheduleAdded:
    """A schedule added and armed: its cron expression (an ``--every`` interval as cron), zone,
    the rule in words, its first occurrence (None: never), how many hosts its task targets
    now, and by whom."""

    name: str
    cron: str
    tz: str
    explain: str
    next: datetime | None
    hosts: int
    by: str

    def as_dict(self) -> dict[str, Any]:
        """The summary ``schedules add --output json`` prints."""
        return {"name": self.name, "cron": self.cron, "tz": self.tz, "explain": self.explain,
                "next": self.next, "hosts": self.hosts}


@dataclass(frozen=True)
class ScheduleChange:
    """What a control verb did, ``by`` whom: ``changed`` False when there was nothing to do (a
    pause of a paused schedule; a resume that only armed it again); ``resume``: the
    occurrences recorded as ``missed`` and the ``next`` one armed."""

    schedule: str
    verb: str
    by: str
    changed: bool = True
    missed: int = 0
    next: datetime | None = None


def add(stores: Stores, principal: Principal, spec: ScheduleSpec) -> ScheduleAdded:
    """Add schedule ``spec``: its task is checked as ``submit`` would, then it is recorded and
    armed for its next occurrence (nothing is written when a check refuses it)."""
    from scheduler.schedules.store import add_schedule

    with stores.database() as engine:
        done = add_schedule(engine, stores.connect, spec, operator=principal,
                            keys=stores.shards)
    return ScheduleAdded(name=done["name"], cron=done["cron"], tz=done["tz"],
                         explain=done["explain"], next=done["next"], hosts=done["hosts"],
                         by=principal.name)


def pause(stores: Stores, principal: Principal, name: str) -> ScheduleChange:
    """Stop firing until resume (occurrences meanwhile are recorded as missed at resume)."""
    from scheduler.schedules.store import pause_schedule

    with stores.database() as engine:
        changed = pause_schedule(engine, stores.connect, name, operator=principal,
                                 keys=stores.shards)
    return ScheduleChange(schedule=name, verb="pause", by=principal.name, changed=changed)


def resume(stores: Stores, principal: Principal, name: str) -> ScheduleChange:
    """Fire again from the next occurrence (also re-arms a schedule Redis lost)."""
    from scheduler.schedules.store import resume_schedule

    with stores.database() as engine:
        done = resume_schedule(engine, stores.connect, name, operator=principal,
                               keys=stores.shards)
    return ScheduleChange(schedule=name, verb="resume", by=principal.name,
                          changed=done["resumed"], missed=done["missed"], next=done["next"])


def remove(stores: Stores, principal: Principal, name: str) -> ScheduleChange:
    """Remove a schedule; the tasks it created stay, with their record."""
    from scheduler.schedules.store import remove_schedule

    with stores.database() as engine:
        remove_schedule(engine, stores.connect, name, operator=principal,
                        keys=stores.shards)
    return ScheduleChange(schedule=name, verb="remove", by=principal.name)


def list_(stores: Stores) -> list[dict[str, Any]]:
    """Every schedule with its last and next occurrence (its columns:
    ``schedules.store.LIST_COLUMNS``)."""
    from scheduler.schedules.store import list_schedules

    with stores.reading() as session:
        return list_schedules(session)


def show(stores: Stores, name: str) -> dict[str, Any]:
    """One schedule: definition, options, latest tasks, latest missed occurrences."""
    from scheduler.schedules.store import show_schedule

    with stores.reading() as session:
        return show_schedule(session, name)


def next_(stores: Stores, name: str, count: int = 5) -> list[dict[str, Any]]:
    """The next ``count`` occurrences (1 to 1000), in the schedule's zone and in UTC."""
    from scheduler.schedules.store import upcoming_rows

    with stores.reading() as session:
        return upcoming_rows(session, name, count)
