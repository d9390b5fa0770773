"""Plugin actions for the fault tests, found by a worker's children through a
``fleetsched.actions`` entry point (``tests.worker_support.plugin_site``), as any plugin is."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from tasks.base import ActionResult


class _TestAction:
    requires_window = False
    expected_ms = 1000
    default_executor = "simulate"
    params: ClassVar[dict[str, Any]] = {}

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        return dict(params)


class HangAction(_TestAction):
    """Sleeps for params["seconds"], whatever its timeout says (a badly written plugin)."""

    name = "hang"
    description = "sleep, ignoring the timeout"
    idempotent = False

    def run(self, session: Any, host: Any, params: dict[str, Any], timeout_s: float,
            ctx: Any = None) -> ActionResult:
        time.sleep(float(params.get("seconds", 60)))
        return ActionResult(ok=True, results=[])


class MarkThenSleep(_TestAction):
    """Appends a line to params["dir"]/<host name> as it starts, then sleeps params["seconds"]:
    a claim comes before the job reaches a child, so a test that kills a child "mid-job" first
    waits for the jobs to say they started."""

    name = "mark-then-sleep"
    description = "say it started, then sleep"
    idempotent = True

    def run(self, session: Any, host: Any, params: dict[str, Any], timeout_s: float,
            ctx: Any = None) -> ActionResult:
        with open(Path(params["dir"]) / host.name, "a") as f:
            f.write("started\n")
        time.sleep(float(params["seconds"]))
        return ActionResult(ok=True, results=[])
