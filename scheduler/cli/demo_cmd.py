"""``fleetsched demo``: a simulated fleet, two operators, fair share, in about a minute.

Thin: build ``scheduler.demo.run.DemoOptions``, run a ``Demo`` (its live view on stderr), then
print the audit summary and the commands to explore further (stdout), or with
``--output json`` a machine-readable summary (each task's completion time, whether Bob's
finished first, the reorders, the audit). Never touches the operator's own queue: the demo
runs in a private temporary state directory (``--keep`` keeps it). With ``--web`` the demo's
fleet is in the web console too (``scheduler.demo.web``): its URL and a token on stderr, and
after the summary the console stays up until Ctrl-C.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.demo.run import HOSTS_RANGE, SPEED_RANGE

EPILOG = """Examples:

  fleetsched demo

  fleetsched demo --hosts 500 --speed 3

  fleetsched demo --keep            # keep the state directory to explore it afterwards

  fleetsched demo --web             # and watch it in the web console (URL and token printed)

  fleetsched demo --output json | jq '.tasks.bob.completed_s, .tasks.alice.completed_s'

Everything is simulated (no host is contacted) and private to the demo: its own Redis and SQLite in a temporary directory; your configuration and queue are never used.

With --web the demo also runs `fleetsched server` on a free loopback port and prints the console's URL and an admin token (stderr) before the tasks start; open the URL and paste the token. After the summary the console stays up, on the demo's record, until you press Ctrl-C; then the demo stops it and cleans up.
"""


def _explore(result: Any) -> list[str]:
    d = result.state_dir
    alice, bob = result.runs
    host = (result.audit.get("failures") or [{"host": "acme-001"}])[0]["host"]
    if d is None:
        return ["Keep the demo's state to explore it:  fleetsched demo --keep",
                "On your own fleet:",
                "  fleetsched hosts import inventory.ini",
                "  fleetsched worker &",
                "  fleetsched submit command --target group:web --param cmd=uptime",
                "  fleetsched tasks watch ID        fleetsched top",
                "  fleetsched report --since 24h --html report.html"]
    base = f"fleetsched --config {shlex.quote(d + '/config.toml')} --state-dir {shlex.quote(d)}"
    return ["Explore the demo's record (kept in " + d + "):",
            f"  {base} report --html demo-report.html",
            f"  {base} tasks show {bob.task_id} --events",
            f"  {base} tasks list",
            f"  {base} hosts history {shlex.quote(host)}",
            f"  {base} top --once",
            f"  rm -rf {shlex.quote(d)}     # when done"]


def demo(
    hosts: Annotated[int, typer.Option(help="Simulated hosts in the generated inventory.", min=HOSTS_RANGE[0], max=HOSTS_RANGE[1])] = 3000,
    speed: Annotated[float, typer.Option(help="Run faster (2 = half the time) or slower.", min=SPEED_RANGE[0], max=SPEED_RANGE[1])] = 1.0,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the demo's state directory (Redis AOF, SQLite) to explore it.")] = False,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table or json (a summary for scripts)")] = output.OutputFormat.table,
    web: Annotated[bool, typer.Option("--web", help="Also serve the web console on a loopback port (URL and token printed); it stays up after the summary until Ctrl-C.")] = False,
) -> None:
    """Simulate 3,000 hosts: Alice's fleet-wide task, Bob's small one, fair share, an audit."""
    from scheduler.demo.run import Demo, DemoOptions
    from scheduler.errors import ValidationError

    if fmt is output.OutputFormat.csv:
        raise ValidationError("the demo has no csv form", hint="use --output table or json")
    Demo(DemoOptions(hosts=hosts, speed=speed, keep=keep, web=web), output.stderr).run(
        report=lambda result: _report(result, fmt))


def _report(result: Any, fmt: output.OutputFormat) -> None:
    """The summary on stdout: the audit table and what to explore, or JSON."""
    from scheduler.demo.run import to_json

    if fmt is output.OutputFormat.json:
        output.stdout.out(to_json(result), highlight=False)
        return
    rows = []
    for t in result.audit["tasks"]:
        run = next(r.summary(result.t0) for r in result.runs if r.task_id == t["task"])
        rows.append({**t, "submitted": f"t+{run['submitted_s']}s",
                     "finished": f"t+{run['completed_s']}s", "took": f"{run['duration_s']}s"})
    output.stdout.print("")
    output.emit_rows(rows, ["who", "task", "jobs", "succeeded", "failed", "submitted",
                            "finished", "took"],
                     title="Audit (read back from the SQL record; t = Alice's submission)")
    output.stdout.print(f"{result.audit['events']} events recorded, "
                        f"{result.reorders} fair-share reorders; whole demo "
                        f"{result.elapsed_s:.0f}s. (simulation)")
    output.stdout.print("")
    for line in _explore(result):
        output.stdout.print(line)
