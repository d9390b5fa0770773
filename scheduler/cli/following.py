"""Printing a task's output as its hosts print it: ``tasks output --follow`` and ``submit
--follow`` (the events are ``scheduler.verbs.liveoutput``'s, in remote mode
``scheduler.remote.liveoutput``'s).

A line goes to stdout as ``host | line`` (``host | [stderr] line`` for stderr), as it arrives;
with ``-o json`` each event is one JSON object on its own line. Notes, gaps and the task's end
go to stderr; the exit code is the one ``tasks wait`` gives.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from scheduler.cli import output
from scheduler.cli.context import verbs_for
from scheduler.errors import ValidationError

__all__ = ["follow_and_print"]


def follow_and_print(stores: Any, task_id: int, *, host: str | None = None,
                     grep: str | None = None,
                     fmt: output.OutputFormat = output.OutputFormat.table) -> int:
    """Print the task's output events until it ends; its exit code (``tasks wait``'s)."""
    if fmt is output.OutputFormat.csv:
        raise ValidationError("--follow prints lines as they come: -o table or -o json",
                              hint="without --follow, -o csv prints the recorded output")
    events = verbs_for(stores, "liveoutput").follow_output(stores, task_id, host=host,
                                                            grep=grep)
    code = 1
    for event in events:
        kind = event["kind"]
        if fmt is output.OutputFormat.json:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
        elif kind == "line":
            mark = "[stderr] " if event["stream"] == "err" else ""
            output.emit_line(f"{event['host']} | {mark}{event['line']}")
            sys.stdout.flush()
        elif kind == "gap":
            output.info(f"{event['host']}: {event['count']} line(s) were not streamed (the "
                        f"worker was behind); `fleetsched tasks output {task_id} --host "
                        f"{event['host']}` shows the recorded output")
        elif kind == "note":
            output.info(event["text"])
        if kind == "end":
            if fmt is not output.OutputFormat.json:
                output.info(f"task {task_id}: {event['sentence']}")
            code = int(event["exit_code"])
    return code
