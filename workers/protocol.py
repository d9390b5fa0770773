"""The messages between a node master and its child processes.

They travel pickled over a socketpair (``multiprocessing.connection.Connection``), in batches:
one ``run`` message carries every job a claim gave to a child, one ``done`` message every
outcome a child has ready. Plain named tuples keep pickling cheap on the hot path.

Master -> child
  ``("init", Settings, threads, worker)``  first message: settings, how many jobs to run at
                                    once, the node's worker id (bound to its log lines)
  ``("run", [Order, ...])``         jobs to start now
  ``("stop",)``                     exit (sent only to a child with no job)

Child -> master
  ``("ready", pid)``                after init
  ``("done", [Outcome, ...])``      finished jobs, in the order they finished
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Order(NamedTuple):
    """One job to run: everything the child needs, so it never reads Redis itself."""

    job_id: str
    token: int
    task_id: str
    host: str
    host_data: dict[str, str]  # the P:host:<name> hash: address, port, user, vars (JSON)
    spec: dict[str, Any]  # the task's spec: action, params (secrets unresolved), executor, ...
    timeout_s: float
    due_ms: int
    attempt: int = 0  # for the log lines of the job (``scheduler.logs.job_context``)
    # The master's time.monotonic() when it placed the job, where its deadline counts from
    # (CLOCK_MONOTONIC is one clock for every process of the machine); 0: not known.
    placed: float = 0.0


class Outcome(NamedTuple):
    """What became of one job in a child. ``ok`` -> ack; otherwise fail with ``error``."""

    job_id: str
    token: int
    ok: bool
    exit_code: int | None
    duration_ms: int
    output: str  # JSON of capped output head/tail, secrets redacted
    error: str | None
    retryable: bool
    started_ms: float  # wall clock (ms epoch, sub-ms precision) when the child started the job
    error_type: str | None = None  # class name of the exception the job failed with, if any
    streamed: bool = False  # lines were published live (``workers.liveout``): end its stream


INIT = "init"
RUN = "run"
STOP = "stop"
READY = "ready"
DONE = "done"
