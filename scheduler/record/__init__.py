"""The SQL system of record: models, engines and sessions, migrations, the recorder, reconcile
and retention. See docs/architecture.md, "System of record".

The names below load their module on first use (PEP 562), so a submodule such as
``scheduler.record.engine`` can be imported without the models (a worker node checks the
schema before its first claim, and the models cost it about 40 ms more)."""

from __future__ import annotations

from scheduler.lazy import lazy_names

_HOME = {
    "make_engine": "scheduler.record.engine", "session_factory": "scheduler.record.engine",
    **dict.fromkeys(("Base", "Event", "Group", "Host", "Job", "Schedule", "Task", "Window",
                     "WindowAssignment", "group_children", "group_hosts"),
                    "scheduler.record.models"),
    **dict.fromkeys(("UTCDateTime", "from_ms", "to_ms", "utcnow"), "scheduler.record.types"),
}

__all__ = sorted(_HOME)
__getattr__ = lazy_names(__name__, _HOME)
