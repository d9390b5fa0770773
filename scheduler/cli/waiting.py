"""What commands say on stderr about tasks they waited for or read from the record only.

Shared by ``submit --wait`` and ``tasks wait`` (:func:`report_wait`), and by ``tasks list``
and ``report`` (:func:`note_record_behind`); the reading is ``scheduler.verbs.follow``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.cli import output
from scheduler.cli.context import verbs_for

if TYPE_CHECKING:
    from scheduler.remote.client import Client
    from scheduler.verbs.stores import Stores


def report_wait(stores: Stores | Client, ids: list[str], timeout_s: float | None) -> int:
    """Block until the tasks end, print one line per job that failed, return the exit code."""
    done = verbs_for(stores, "follow").wait(stores, ids, timeout_s=timeout_s)
    if done.record_behind:
        output.info("warning: the SQL record is behind (is a recorder running?): some "
                    "failed hosts may be missing below; see `fleetsched tasks output "
                    "TASK --failed` later")
    for row in done.failures:
        rc = "-" if row["exit_code"] is None else row["exit_code"]
        last = row["lines"][-1] if row["lines"] else ""
        output.info(f"{row['host']} | {row['state']} | rc={rc} | job {row['job']}"
                    + (f" | {last}" if last else ""))
    for t in done.tasks:
        output.info(f"task {t.task_id}: {t.progress.sentence()}")
        if t.progress.stopped:
            output.info(f"rollout stopped: {t.wave_line()}")
            output.info(f"hint: fleetsched tasks continue {t.task_id} releases the next wave; "
                        f"fleetsched tasks cancel {t.task_id} ends the rollout")
    return done.exit_code


def note_record_behind(stores: Stores | Client, recorded_done: dict[int, int]) -> None:
    """One line on stderr when the queue counts more ended jobs than the SQL record for any of
    these tasks (the unfinished ones ``tasks list`` or ``report`` shows, with their recorded
    done count): those views read the record only."""
    ahead = verbs_for(stores, "follow").record_behind(stores, recorded_done)
    if ahead:
        shown = ", ".join(map(str, ahead[:10])) + (" ..." if len(ahead) > 10 else "")
        output.info(f"note: the SQL record is behind the queue for task(s) {shown}: these "
                    "numbers are the record's; `fleetsched tasks show TASK` has the live ones "
                    "(is a recorder running?)")
