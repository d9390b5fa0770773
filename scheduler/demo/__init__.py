"""``fleetsched demo``: the whole product on a simulated fleet.

- ``run``: the demo itself (settings, Redis, workers, two tasks, the live view, the audit);
- ``fleet``: the generated inventory and service windows it runs on.
"""

__all__ = ["fleet", "run"]
