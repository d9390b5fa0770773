"""The SQL system of record: models, engines and sessions, migrations, the recorder, reconcile
and retention. See docs/architecture.md, "System of record"."""

from scheduler.record.engine import make_engine, session_factory
from scheduler.record.models import (
    Base,
    Event,
    Group,
    Host,
    Job,
    Schedule,
    Task,
    Window,
    WindowAssignment,
    group_children,
    group_hosts,
)
from scheduler.record.types import UTCDateTime, from_ms, to_ms, utcnow

__all__ = [
    "Base", "Event", "Group", "Host", "Job", "Schedule", "Task", "Window", "WindowAssignment",
    "group_children", "group_hosts", "make_engine", "session_factory", "UTCDateTime",
    "from_ms", "to_ms", "utcnow",
]
