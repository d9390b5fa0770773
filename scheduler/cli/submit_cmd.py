"""``fleetsched submit``: fan a task out to hosts, from options or a YAML task file.

Thin: parse the options into a ``scheduler.submission.submit.TaskRequest`` (``task_options``,
or a task file through ``scheduler.submission.taskfile``), call the ``scheduler.verbs.submit``
verb, which plans it, lets this command show the plan (``--dry-run``) or ask for confirmation
of a fleet-wide task's blast radius, then records and queues it. The task id goes to
stdout (``id=$(fleetsched submit ...)``); messages go to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.submission_view import confirm as _confirm
from scheduler.cli.submission_view import show_plan as _show_plan
from scheduler.cli.submission_view import show_repeat as _show_repeat
from scheduler.cli.submission_view import show_submitted as _show_submitted
from scheduler.cli.submission_view import view as _view
from scheduler.cli.task_options import request_of
from scheduler.cli.waiting import report_wait
from scheduler.errors import ValidationError

EPILOG = """Examples:

  fleetsched submit command --target group:web,!web-07 --param cmd='systemctl reload nginx' \\
      --max-concurrency 10% --max-failures 2

  fleetsched submit copy -t 'db-*' -p src=/srv/my.cnf -p dest=/etc/mysql/my.cnf --at 2026-12-01T22:00

  fleetsched submit firmware -t group:customer-acme -p image=/srv/fw-4.2.bin \\
      -p upgrade_cmd='fwupdate --apply {image}' -p version_cmd='fwupdate --version' \\
      -p expected_version=4.2 --in-window --dry-run

  fleetsched submit -f task.yaml --yes

  fleetsched submit command -t group:db -p cmd='systemctl restart postgresql' --become-user root

  fleetsched submit command -t group:web -p cmd='systemctl is-active nginx' --wait --yes

  fleetsched submit command -t web-07 -p cmd='journalctl -n 20 -u nginx' --follow --yes

  fleetsched submit command -t group:web -p cmd='systemctl reload nginx' \\
      --waves 1,10%,50%,100% --wave-gate approve --wave-check 'systemctl is-active nginx'

  fleetsched submit command -t group:db -p cmd='pg_dump app >/dev/null' \\
      --notify https://hooks.slack.com/services/T0/B0/XXXX --notify mailto:dba@example.org

Exit codes: 0 queued, 1 recorded but not queued (run fleetsched reconcile), 2 bad input
(nothing written), 4 unknown action, 5 declined (a fleet-wide task needs --yes without a
terminal). With --wait, once the task has ended: 0 every job succeeded, 3 some failed, 5
cancelled or aborted, 1 infrastructure trouble or --wait-timeout; a rollout in waves that
stopped (a wave's failures or its --wave-check) has ended for --wait: exit 3. With --follow,
each host's lines as they are printed, then the same exit codes as --wait (--wait-timeout
too).
"""


def submit(
    ctx: typer.Context,
    action: Annotated[str | None, typer.Argument(help="The action (see `fleetsched actions list`).")] = None,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Hosts: group:NAME, host names, globs, vars.KEY=VALUE, &intersections, !exclusions, all.")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="An action parameter NAME=VALUE (repeatable); secrets as @env:NAME or @file:/path.")] = None,
    at: Annotated[str | None, typer.Option("--at", help="Not before this ISO time (local zone unless given).")] = None,
    in_: Annotated[str | None, typer.Option("--in", help="Not before this long from now (10m, 2h).")] = None,
    in_window: Annotated[bool, typer.Option("--in-window", help="Each host's job waits for the host's next service window (the default for actions that require windows, such as firmware).")] = False,
    ignore_windows: Annotated[bool, typer.Option("--ignore-windows", help="Run an action that requires service windows outside them (recorded with the task). Freezes still hold its jobs.")] = False,
    break_glass: Annotated[str | None, typer.Option("--break-glass", metavar="REASON", help="Run through freezes (every job of every task waits for its host's freezes otherwise); the reason is recorded with the task.")] = None,
    customer_output: Annotated[bool, typer.Option("--customer-output", help="Customers (customer-viewer, customer-approver tokens) may read the output of their own hosts' jobs; without it they see states and exit codes only.")] = False,
    max_concurrency: Annotated[str | None, typer.Option("--max-concurrency", help="Jobs of this task running at once: N or P% of its hosts.")] = None,
    max_failures: Annotated[str | None, typer.Option("--max-failures", help="Abort after this many hosts failed: N or P%. Counts hosts that failed any attempt (see --count-failures).")] = None,
    count_failures: Annotated[str, typer.Option("--count-failures", help="What --max-failures counts: attempts (hosts that failed any attempt: a failing change stops after N hosts, retries or not) or final (jobs failed for good, after their retries).")] = "attempts",
    timeout: Annotated[str | None, typer.Option("--timeout", help="Per attempt (default 1h).")] = None,
    retries: Annotated[int | None, typer.Option("--retries", help="Retries after a failed attempt (default 2).")] = None,
    backoff: Annotated[str | None, typer.Option("--backoff", help="First retry delay, doubling (default 1s).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="A name for the task.")] = None,
    priority: Annotated[str, typer.Option("--priority", help="urgent, normal or bulk.")] = "normal",
    executor: Annotated[str | None, typer.Option("--executor", help="ssh, local or simulate (default: the action's).")] = None,
    executor_option: Annotated[list[str] | None, typer.Option("--executor-option", help="Executor option NAME=VALUE (repeatable).")] = None,
    become_user: Annotated[str | None, typer.Option("--become-user", help="Run the commands as this user through sudo -n on each host (ssh executor).")] = None,
    idempotent: Annotated[bool | None, typer.Option("--idempotent/--not-idempotent", help="Override the action's flag: may a lost job run again?")] = None,
    allow_overlap: Annotated[bool | None, typer.Option("--allow-overlap/--exclusive", help="May a job run on a host while another task's job runs there? By default one job per host at a time (the action may declare itself safe to overlap).")] = None,
    notify: Annotated[list[str] | None, typer.Option("--notify", help="Also tell this webhook URL or mailto:ADDRESS if the task fails, aborts or loses jobs (repeatable).")] = None,
    waves: Annotated[str | None, typer.Option("--waves", help="Roll out in waves of these sizes, e.g. 1,10%,50%,100% (N hosts or P% of them; the last size repeats); the first may be a vars. or group: term, e.g. vars.tier=canary,100%.")] = None,
    wave_order: Annotated[str | None, typer.Option("--wave-order", help="Which hosts go first: inventory (job order, the default), random (seeded by --wave-seed, else the task id) or by-group (groups spread across waves).")] = None,
    wave_seed: Annotated[str | None, typer.Option("--wave-seed", help="With --wave-order random: the seed of the draw (a --dry-run prints the one it shows).")] = None,
    wave_pause: Annotated[str | None, typer.Option("--wave-pause", help="Wait this long after each wave (10m).")] = None,
    wave_gate: Annotated[str | None, typer.Option("--wave-gate", help="approve: after each wave, wait for `fleetsched tasks continue TASK`.")] = None,
    wave_check: Annotated[str | None, typer.Option("--wave-check", help="A shell command run on each finished wave's hosts; any failure stops the rollout.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="A YAML task file instead of the options above.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write and queue nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Submit a fleet-wide task without asking.")] = False,
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key", metavar="KEY", help="Run again with the same KEY after an error or a timeout: if the first try recorded the task, its id comes back and nothing is queued twice.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Block until the task ends; one line per failed host; exit 0 all succeeded, 3 some or all failed, 5 cancelled or aborted, 1 infrastructure trouble or the timeout.")] = False,
    wait_timeout: Annotated[str | None, typer.Option("--wait-timeout", help="With --wait or --follow: give up after this long (exit code 1).")] = None,
    follow: Annotated[bool, typer.Option("--follow", help="Print each host's lines as they are printed (`host | line`) until the task ends; exit code as with --wait.")] = False,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Submit a task: one job per target host, queued now, later, or in service windows."""
    options = {"in_window": in_window, "ignore_windows": ignore_windows,
               "break_glass": break_glass, "customer_output": customer_output,
               "max_concurrency": max_concurrency,
               "max_failures": max_failures, "count_failures": count_failures,
               "timeout": timeout, "retries": retries,
               "backoff": backoff, "name": name, "priority": priority, "executor": executor,
               "executor_option": executor_option, "idempotent": idempotent,
               "allow_overlap": allow_overlap,
               "become_user": become_user, "notify": notify, "waves": waves,
               "wave_order": wave_order, "wave_pause": wave_pause, "wave_gate": wave_gate,
               "wave_check": wave_check, "wave_seed": wave_seed}
    if file is not None:
        from scheduler.submission.taskfile import load_task_file

        given = [k for k, v in {"ACTION": action, "--target": target, "--param": param,
                                "--at": at, "--in": in_}.items() if v]
        given += ["--" + k.replace("_", "-") for k, v in options.items()
                  if v not in (None, False, [], "normal", "attempts")]
        if given:
            raise ValidationError(f"give the task in {file} or as options, not both "
                                  f"({given[0]} with --file)")
        request = load_task_file(file)  # a bad file fails before the database is opened
    else:
        request = request_of(action, target, param, at, in_, options)
    from scheduler.parse import parse_duration

    # a bad --wait-timeout is refused before anything is queued
    limit_s = parse_duration(wait_timeout, "--wait-timeout").total_seconds() \
        if wait_timeout else None
    submitting, stores, principal = verbs(ctx, "submit")
    done = submitting.submit(stores, principal, request, dry_run=dry_run,
                             confirm=lambda plan: _confirm(plan, yes),
                             request_key=idempotency_key)
    if done.task_id is None:
        view = _view(done.plan, draw=True)
        _show_plan(view, fmt)
        output.info(f"dry run: {view.blast_radius}; nothing was queued")
        return
    if done.repeat is not None:
        _show_repeat(done.repeat, idempotency_key or "", fmt)
    else:
        _show_submitted(stores, done, fmt)
    if follow:
        from scheduler.cli.following import follow_and_print

        raise typer.Exit(follow_and_print(stores, int(done.task_id), fmt=fmt,
                                          timeout_s=limit_s))
    if wait:
        raise typer.Exit(report_wait(stores, [str(done.task_id)], limit_s))
