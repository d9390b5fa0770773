"""``reconcile``: give Redis back what the SQL record says it should hold.

The repair is ``scheduler.submission.reconcile``'s; this verb opens the record and the queue's
coordinating shard, and hands it the notice detector for the events it records. A bad notify
setting must not stand in the way of a repair: then only the tasks' and schedules' own
targets are told, and ``note`` gets one warning line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from scheduler.config import Settings
    from scheduler.notify import Detector
    from scheduler.submission.reconcile import ReconcileReport

__all__ = ["reconcile"]


def reconcile(stores: Stores, principal: Principal, *, dry_run: bool = False,
              nodes_stopped: bool = False,
              note: Callable[[str], None] | None = None) -> ReconcileReport:
    """Repair Redis from SQL as ``principal``; ``nodes_stopped``: every worker node is stopped,
    so do not wait up to a lease for the live ones to report the jobs they run."""
    from scheduler.submission.reconcile import reconcile as run_reconcile

    settings = stores.settings
    with stores.database() as engine, stores.queue(coord=True) as queue:
        return run_reconcile(engine, queue, operator=principal, dry_run=dry_run,
                             on_batch=_detector(settings, note), shards=stores.shards,
                             nodes_wait_ms=0 if nodes_stopped else settings.lease_ms)


def _detector(settings: Settings, note: Callable[[str], None] | None) -> Detector:
    from scheduler.errors import ConfigError
    from scheduler.notify import Detector, Policy

    try:
        return Detector(Policy.from_settings(settings))
    except ConfigError as exc:
        if note is not None:
            note(f"warning: {exc}; notifying only the tasks' own targets")
        return Detector(Policy())
