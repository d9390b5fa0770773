"""``fleetsched worker``: run this node's master; ``fleetsched worker list``: the live workers.

Thin: parse the flags into a ``workers.config.NodeConfig``, call ``workers.serve.serve`` (or
read the workers hash), render. Exit code 0 after a clean shutdown.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.config import Settings

worker_app = typer.Typer(
    help="Run a worker node (the master claims due jobs and runs them in child processes).",
    invoke_without_command=True,
)

JOBS_PER_PROCESS = 50
"""Default share of one child process when --processes is not given."""


def _ms(text: str | None, what: str) -> int | None:
    if text is None:
        return None
    if text.strip().rstrip("msh").strip() in ("0", "0.0"):
        return 0  # "--grace 0": give running jobs back at once
    from scheduler.parse import parse_duration

    return int(parse_duration(text, what).total_seconds() * 1000)


@worker_app.callback()
def worker(
    ctx: typer.Context,
    slots: Annotated[int | None, typer.Option(help="Jobs this node runs at once (default: the worker_slots setting).")] = None,
    processes: Annotated[int | None, typer.Option(help=f"Child processes at most (default: one per {JOBS_PER_PROCESS} slots, at least 2).")] = None,
    lease: Annotated[str | None, typer.Option(help="Lease of a claimed job, renewed by heartbeats (e.g. 30s; default: the lease_ms setting).")] = None,
    grace: Annotated[str, typer.Option(help="On SIGTERM, how long running jobs may take to finish before their leases are given back.")] = "30s",
    idle: Annotated[str, typer.Option(help="A child process with no job for this long exits.")] = "30s",
    worker_id: Annotated[str | None, typer.Option("--id", help="This worker's name (default: <hostname>-<pid>).")] = None,
    recorder: Annotated[bool, typer.Option("--recorder/--no-recorder", help="Also copy events into SQL, from a recorder process this node starts.")] = True,
    metrics_port: Annotated[int | None, typer.Option(help="Serve Prometheus metrics on this port at /metrics; 0 = off (default: the metrics_port setting).")] = None,
    metrics_address: Annotated[str | None, typer.Option(help="Address the metrics endpoint listens on (default: the metrics_address setting, 127.0.0.1).")] = None,
    log_format: Annotated[str | None, typer.Option(help="Log lines as json, text, or auto: JSON when stderr is not a terminal (default: the log_format setting).")] = None,
) -> None:
    """Run this node's master until SIGTERM (finish running jobs) or SIGINT (give them back)."""
    if ctx.invoked_subcommand is not None:
        return
    from workers.config import NodeConfig, default_worker_id
    from workers.serve import serve

    settings = _with_flags(state(ctx).settings, metrics_port=metrics_port,
                           metrics_address=metrics_address, log_format=log_format)
    n_slots = slots if slots is not None else settings.worker_slots
    if n_slots < 1:
        from scheduler.errors import ValidationError

        raise ValidationError(f"--slots must be at least 1, not {n_slots}")
    n_proc = processes if processes is not None else min(n_slots, max(2, math.ceil(n_slots / JOBS_PER_PROCESS)))
    lease_ms = settings.lease_ms if lease is None else (_ms(lease, "--lease") or 0)
    config = NodeConfig(
        settings=settings, slots=n_slots, processes=n_proc, lease_ms=lease_ms,
        heartbeat_ms=min(settings.heartbeat_ms, lease_ms // 3),
        grace_s=(_ms(grace, "--grace") or 0) / 1000, idle_s=(_ms(idle, "--idle") or 0) / 1000,
        worker_id=worker_id or default_worker_id(), recorder=recorder,
    )

    def started(node: object) -> None:
        output.service_info(
            "fleetsched.worker",
            f"worker {config.worker_id}: {config.slots} slots in up to {config.processes} "
            f"processes, lease {config.lease_ms / 1000:g}s, heartbeat "
            f"{config.heartbeat_ms / 1000:g}s; SIGTERM finishes running jobs "
            f"(grace {config.grace_s:g}s), SIGINT gives them back")

    stats = serve(config, on_started=started)
    output.service_info("fleetsched.worker",
                        f"worker {config.worker_id} stopped: {stats.acked} acked, "
                        f"{stats.failed} failed, {stats.retried} retried, "
                        f"{stats.released} given back")


def _with_flags(settings: Settings, **flags: object) -> Settings:
    """The settings with the worker's own flags applied (and checked like the settings)."""
    from scheduler.config import replace
    from scheduler.errors import ConfigError, ValidationError

    given = {k: v for k, v in flags.items() if v is not None}
    try:
        return replace(settings, **given) if given else settings
    except ConfigError as exc:
        raise ValidationError(str(exc), hint=exc.hint or "run fleetsched worker --help") from None


@worker_app.command("list")
def list_workers(
    ctx: typer.Context,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table, json or csv")] = output.OutputFormat.table,
) -> None:
    """The workers that reported a heartbeat: node, pid, slots, busy, age of the last beat."""
    from scheduler.cli.context import queue_client
    from scheduler.queue.presence import read_workers

    settings = state(ctx).settings
    client = queue_client(settings)
    try:
        rows = read_workers(client, settings.queue_prefix)
    finally:
        client.close()
    output.emit_rows(rows, ["worker", "node", "pid", "slots", "busy", "processes", "age_s", "acked", "failed"], fmt)
