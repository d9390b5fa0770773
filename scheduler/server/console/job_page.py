"""``/ui/jobs/{job_id}``: one host's job, and ``/ui/jobs/{job_id}/live`` while it runs.

1. The job's host and state, then every attempt (``tasks.job``, ``jobs show``'s verb): when,
   on which worker with which fencing token, how it ended, its exit code, each step or
   command with what it printed (``queue.output.output_lines``: head, what was cut, tail) in
   ``<pre class="output">``; late results of workers that had lost it; what is known of a job
   lost with its worker;
2. while the job has not ended, the page follows ``/live``, which sends the attempts
   (``<section id="attempts">``) again whenever they change, and ends with the job.

A customer reads its own jobs only (another's is not found), their output where the task shows
it to customers (the verb's ``tenant``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response

from scheduler.record.models import JOB_FINAL_STATES
from scheduler.server.auth import stores_of
from scheduler.server.console import stream
from scheduler.server.console.web import PREFIX, Viewer, page_viewer, render, templates
from scheduler.verbs import tasks

if TYPE_CHECKING:
    from scheduler.reports.attempts import Attempt, JobView

__all__ = ["router"]

router = APIRouter()
JobId = Annotated[str, Path(min_length=1, max_length=80)]  # <task>.<n>, as the record keeps it


def _steps(attempt: Attempt) -> list[dict[str, Any]]:
    """An attempt's commands or steps as the page shows them: a title and the printed lines."""
    from scheduler.queue.output import output_lines, step_summary

    out = []
    for n, cmd in enumerate(attempt.commands, 1):
        if "step" in cmd:
            title = f"step {n}, {step_summary(cmd)}" + (
                " (decided the outcome)" if cmd.get("decides") else "")
        else:
            title = f"exit {cmd.get('exit_code')}"
        out.append({"title": title, "command": cmd.get("command") or "",
                    "file": bool(cmd.get("file")), "error": cmd.get("error"),
                    "note": cmd.get("note"), "lines": "\n".join(output_lines([cmd]))})
    return out


def _context(request: Request, seen: Viewer, job_id: str) -> dict[str, Any]:
    from scheduler.queue.output import output_lines

    view: JobView = tasks.job(stores_of(request), job_id, tenant=seen.customer)
    return {"job": view, "steps": [_steps(a) for a in view.attempts],
            "late": [{**late, "lines": "\n".join(output_lines(late["commands"]))}
                     for late in view.late],
            "ended": view.state in JOB_FINAL_STATES}


@router.get("/jobs/{job_id}", include_in_schema=False)
def job_view(request: Request, job_id: JobId,
             seen: Annotated[Viewer, Depends(page_viewer("jobs.show"))]) -> Response:
    return render(request, seen, "job.html", **_context(request, seen, job_id))


@router.get("/jobs/{job_id}/live", include_in_schema=False)
def job_live(request: Request, job_id: JobId,
             seen: Annotated[Viewer, Depends(page_viewer("jobs.show"))]) -> Response:
    _context(request, seen, job_id)  # not found: an error page, not a stream

    def read() -> stream.Frame:
        context = _context(request, seen, job_id)
        html = templates.get_template("job_attempts.html").render(
            viewer=seen, prefix=PREFIX, **context)
        return {"attempts": html}, context["ended"]

    return stream.fragments(request, read)
