"""Stored service windows: definitions in SQL, assignment to hosts and groups, Redis copies.

- ``store``: what ``fleetsched windows`` adds, assigns, approves, lists and removes;
- ``assignment``: the windows in force for each host (host beats group) and the due times a
  submission plans inside them;
- ``wire``: the windows as they travel through Redis (a job's window field, the copies of
  definitions that claims read), without SQL.

The time arithmetic itself is ``scheduler.calendar.windows``.
"""

__all__ = ["assignment", "store", "wire"]
