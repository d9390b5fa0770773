"""``fleetsched reconcile``: re-enqueue what Redis lost, from the SQL record.

Thin: call the ``scheduler.verbs.reconcile`` verb, print the counts.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs_of

reconcile_app = typer.Typer(
    help="Repair the queue from SQL after Redis lost data (a crash, or a server started empty).",
    invoke_without_command=True,
)


@reconcile_app.callback()
def reconcile(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be repaired.")] = False,
    nodes_stopped: Annotated[bool, typer.Option(
        "--nodes-stopped", help="Every worker node is stopped: do not wait up to a lease for "
        "the live nodes to report the jobs they run.")] = False,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Recreate missing task hashes and re-enqueue unfinished jobs Redis lost; never a job
    SQL knows is finished, nor one a live worker node runs (it is asked first, for up to a
    lease), nor a started job of a non-idempotent task (it ends as lost)."""
    if ctx.invoked_subcommand is not None:
        return
    from scheduler.verbs.reconcile import reconcile as reconcile_verb

    report = reconcile_verb(*verbs_of(ctx), dry_run=dry_run, nodes_stopped=nodes_stopped,
                            note=output.info)
    output.emit_object(report.counts(), fmt)
    verb = "would re-enqueue" if dry_run else "re-enqueued"
    output.info(f"{verb} {report.jobs_requeued} jobs and "
                f"{'would recreate' if dry_run else 'recreated'} {report.tasks_recreated} tasks")
    if report.group_limits_restored:
        output.info(f"{'would restore' if dry_run else 'restored'} "
                    f"{report.group_limits_restored} group limit(s) from SQL")
    if report.adopted:
        shown = ", ".join(report.adopted[:10]) + (" ..." if len(report.adopted) > 10 else "")
        output.info(f"running on a live worker node, back under its lease (not run again): "
                    f"{shown}")
    if report.not_rerun:
        shown = ", ".join(report.not_rerun[:10]) + (" ..." if len(report.not_rerun) > 10 else "")
        output.info(f"ended as lost, not run again (started, non-idempotent, no live node runs "
                    f"them; check the hosts): {shown}")
    if report.in_stream:
        shown = ", ".join(report.in_stream[:10]) + (" ..." if len(report.in_stream) > 10 else "")
        output.info(f"skipped, their events are still on the way to SQL (a recorder holds them): "
                    f"{shown}; run reconcile again once `fleetsched recorder status` shows no lag")
