"""fleetsched's benchmark job: a plugin action (entry point ``fleetsched.actions``: ``bench-record``).

It runs no command on the host: it sleeps ``sleep_ms`` (W4 only) and makes one Redis round trip,
the RPUSH of ``benchmarks/peers/systems/body.py`` (``PREFIX + host name`` and the time), like
every peer's job body. This directory is put on ``PYTHONPATH`` for ``fleetsched submit`` and
``fleetsched worker``; the ``.dist-info`` beside this file declares the entry point, so
fleetsched finds the action as it finds any installed plugin.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "systems"))

from body import record

from tasks import ActionContext, BaseAction, Integer, Param, Steps, Text


class BenchRecord(BaseAction):
    name = "bench-record"
    description = "Benchmark job: one RPUSH of the host's name and the time to $BENCH_REDIS_URL."
    idempotent = True
    requires_window = False
    expected_ms = 10
    default_executor = "simulate"
    params = {
        "prefix": Param("prefix", Text(), "put before the host name in the record", default=""),
        "sleep_ms": Param("sleep_ms", Integer(min=0, max=60_000), "sleep this long first",
                          default=0),
    }

    def execute(self, steps: Steps, host, params, ctx: ActionContext) -> None:
        record(f"{params['prefix']}{host.name}", params["sleep_ms"])
        steps.changed = False
