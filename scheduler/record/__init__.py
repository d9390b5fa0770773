"""The SQL system of record: models, engines and sessions, migrations, the recorder, reconcile
and retention. See docs/architecture.md, "System of record".

The names below load their module on first use (PEP 562), so a submodule such as
``scheduler.record.engine`` can be imported without the models (a worker node checks the
schema before its first claim, and the models cost it about 40 ms more)."""

from __future__ import annotations

import importlib
from typing import Any

_MODULE_OF = {
    "make_engine": "engine", "session_factory": "engine",
    **dict.fromkeys(("Base", "Event", "Group", "Host", "Job", "Schedule", "Task", "Window",
                     "WindowAssignment", "group_children", "group_hosts"), "models"),
    **dict.fromkeys(("UTCDateTime", "from_ms", "to_ms", "utcnow"), "types"),
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
