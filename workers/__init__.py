"""Worker nodes: the node master, its child processes, heartbeats, and the executors.

``Node`` is one node's master (``workers.master``); ``serve`` runs it as a process with signal
handling (``fleetsched worker``); ``NodeConfig`` shapes it. ``workers.executors`` holds how a
job reaches a host (ssh, local, simulate).
"""

from workers.config import NodeConfig, default_worker_id
from workers.deferral import Deferral, window_deferral
from workers.master import Node
from workers.serve import serve
from workers.stats import NodeStats

__all__ = ["Deferral", "Node", "NodeConfig", "NodeStats", "default_worker_id", "serve",
           "window_deferral"]
