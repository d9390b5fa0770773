"""``fleetsched jobs show JOB``: one job's attempts, what each printed, and what is known when it
was lost (``scheduler.verbs.tasks.job``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption

jobs_app = typer.Typer(help="Single jobs: every attempt of one host's job and what it printed.",
                       no_args_is_help=True)

SHOW_EPILOG = """Examples:

  fleetsched jobs show 42.7

  fleetsched jobs show 42.7 --output json
"""


@jobs_app.command("show", epilog=SHOW_EPILOG)
def show_cmd(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(
        help="The job id, <task>.<n> (see `fleetsched tasks show TASK`).")],
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """A job's host and state, then each attempt: when, which worker and fencing token, how it
    ended, its exit code (from the step that decided the outcome) and each step with its exit
    code, duration and output; late results of workers that had lost it; for a job lost with
    its worker, what is known and what to check on the host."""
    from scheduler.queue.output import output_lines, step_summary
    from scheduler.reports.attempts import shown_exit

    tasks, stores, _principal = verbs(ctx, "tasks")
    view = tasks.job(stores, job_id)
    if fmt is not output.OutputFormat.table:
        if fmt is output.OutputFormat.json:
            output.stdout.out(json.dumps(view.as_dict(), indent=2, default=str))
            return
        output.emit_rows([a.as_dict() for a in view.attempts],
                         ["attempt", "token", "worker", "started", "ended", "end", "exit_code",
                          "duration_ms", "error"], fmt)
        return
    output.emit_line(f"job {view.job} on {view.host}: {view.state} (task {view.task}, "
                     f"{len(view.attempts)} attempt(s))")
    for a in view.attempts:
        started = a.started.isoformat(timespec="milliseconds") if a.started else "?"
        output.emit_line(f"\nattempt {a.attempt} (token {a.token}) on {a.worker}, started "
                         f"{started}: {a.end or 'running'}"
                         + (f", exit code {code}" if (code := shown_exit(a.exit_code, a.error))
                            else "")
                         + (f", {a.duration_ms} ms" if a.duration_ms is not None else ""))
        if a.error:
            output.emit_line(f"  error: {a.error}")
        for n, cmd in enumerate(a.commands, 1):
            if "step" not in cmd:  # output of an action that reports no steps
                output.emit_line(f"  $ {cmd.get('command', '')}  (exit {cmd.get('exit_code')})")
                for line in output_lines([cmd]):
                    output.emit_line(f"  | {line}")
                continue
            output.emit_line(f"  step {n}, {step_summary(cmd)}"
                             + ("  <- decided the outcome" if cmd.get("decides") else ""))
            if cmd.get("command"):
                output.emit_line(f"    {'file:' if cmd.get('file') else '$'} {cmd['command']}")
            for key in ("error", "note"):
                if cmd.get(key):
                    output.emit_line(f"    {key}: {cmd[key]}")
            for line in output_lines([cmd]):
                output.emit_line(f"    | {line}")
    for late in view.late:
        output.emit_line(f"\nlate {late['verb']} from {late['worker']} (token {late['token']}, "
                         f"{late['reason']}): refused; exit code {late['exit_code']}")
        for line in output_lines(late["commands"]):
            output.emit_line(f"  | {line}")
    if view.lost_note:
        output.emit_line(f"\n{view.lost_note}")
