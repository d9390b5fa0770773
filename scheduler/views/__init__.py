"""Live views of the queue, from Redis: ``fleetsched top``, ``fleetsched tasks watch`` and the
demo's progress display.

- ``scheduler.views.snapshot``: reading (``take_snapshot``, ``read_tasks``, ``TaskProgress``,
  ``RateMeter``);
- ``scheduler.views.render``: drawing (bars, task tables, the ``top`` frame);
- ``scheduler.views.live``: the redraw loops (``top``, ``watch``, ``FailureFeed``).
"""

from scheduler.views.live import FailureFeed, ended, top, watch
from scheduler.views.render import bar, task_table, top_frame
from scheduler.views.snapshot import (
    QueueSnapshot,
    RateMeter,
    TaskProgress,
    list_task_ids,
    read_tasks,
    take_snapshot,
)

__all__ = ["FailureFeed", "QueueSnapshot", "RateMeter", "TaskProgress", "bar", "ended",
           "list_task_ids", "read_tasks", "take_snapshot", "task_table", "top", "top_frame",
           "watch"]
