"""Worker nodes: the node master, its child processes and heartbeats.

``Node`` is one node's master (``workers.master``); ``workers.serve.serve`` runs it as a
process with signal handling (``fleetsched worker``; not re-exported here: the name is its
module's, which an import of ``workers.serve`` binds on the package); ``NodeConfig`` shapes it.
How a job reaches a host (ssh, local, simulate) is :mod:`tasks.executors`.

The names are imported when first used (PEP 562), not with the package: a child process
(``python -m workers.child``) imports ``workers`` too, and must not pay for the master's
modules (SQLAlchemy, the window store) before it can say ready.
"""

from __future__ import annotations

from scheduler.lazy import lazy_names

__all__ = ["Deferral", "Node", "NodeConfig", "NodeStats", "default_worker_id",
           "window_deferral"]

_HOME = {"Deferral": "workers.deferral", "window_deferral": "workers.deferral",
         "Node": "workers.master", "NodeConfig": "workers.config",
         "default_worker_id": "workers.config", "NodeStats": "workers.stats"}

__getattr__ = lazy_names(__name__, _HOME)
