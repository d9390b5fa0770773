"""Stored service windows: definitions in SQL, assignment to hosts and groups, Redis copies.

- ``store``: what ``fleetsched windows`` adds, assigns, approves, lists and removes;
- ``assignment``: the windows in force for each host (host beats group), the due times a
  submission plans inside them, and the copies of definitions in Redis that claims read.

The time arithmetic itself is ``scheduler.calendar.windows``.
"""

__all__ = ["assignment", "store"]
