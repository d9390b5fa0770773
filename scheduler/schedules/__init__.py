"""Recurring schedules: stored definitions, their entry in the due set, and firing.

- ``store``: define, list, pause, resume and remove schedules (SQL, with audit events);
- ``entry``: the Redis half, ``sched:<name>`` in the urgent due set (arm, disarm, fire);
- ``firing``: a claimed entry becomes each occurrence's task, exactly once.
"""

__all__ = ["entry", "firing", "store"]
