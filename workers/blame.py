"""Who is to blame when a run ends without success: the host, or the worker that ran it.

The one rule (docs/reliability.md, "Host failure or worker loss"), which every path that ends
a run applies through :func:`blame_of`:

- the **host** did it: the action failed (a non-zero exit, the host unreachable, a refused
  host key or login) or the job ran past its timeout on the host. It counts against the
  task's ``max_failures``, a wave's limit and the failure notices, and against ``max_attempts``;
- the **worker** lost it: its child process died (kill -9, out of memory, a crash), or the
  worker stopped it (a shutdown, a sibling's timeout). It counts against ``max_attempts``
  only. An idempotent job runs again; a non-idempotent one ends ``lost`` (it may have run).

A run whose lease expired (its whole node stopped) is the worker's too: ``claim.lua`` applies
the same rule in Redis (its ``lose``). A run that never started (no child received it) is
nobody's: it is given back without an attempt (``Queue.release``).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["Blame", "Ending", "blame_of"]

Blame = Literal["host", "worker"]
Ending = Literal["failed", "timeout", "lost", "interrupted"]

_BLAME: dict[str, Blame] = {
    "failed": "host",  # the action reported a failure
    "timeout": "host",  # past its timeout on the host; the worker stopped it
    "lost": "worker",  # its child process died unexpectedly
    "interrupted": "worker",  # the worker stopped it: shutdown, a sibling's timeout
}


def blame_of(ending: Ending) -> Blame:
    """Who a run's unsuccessful ending counts against (see the module docstring)."""
    return _BLAME[ending]
