"""``fleetsched doctor``: check this installation and say what to fix.

Thin: ``scheduler.health.checks.doctor`` runs the checks (configuration, state directory, Redis
binary, reachability, eviction policy, version and AOF, the queue's identity, database
migrations, known_hosts, SSH keys and their permissions); each finding is one line with a
``hint:``. Exit code 1 when any check failed. An invalid configuration is itself a finding,
not an error exit.
"""

from __future__ import annotations

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.cli.findings import render_findings
from scheduler.cli.output import OutputOption

EPILOG = """Examples:

  fleetsched doctor

  fleetsched --redis-url redis://redis.internal:6379/0 doctor --output json

Exit codes: 0 nothing to fix (warnings allowed), 1 something must be fixed.
"""


def doctor(
    ctx: typer.Context,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Check configuration, Redis and the queue's identity, database migrations and SSH set-up;
    say what to fix."""
    from scheduler.errors import ConfigError
    from scheduler.health.checks import Finding, healthy
    from scheduler.health.checks import doctor as run_doctor

    st = state(ctx)
    try:
        settings = st.settings
    except ConfigError as exc:
        findings = [Finding("config", "fail", str(exc), exc.hint or "fix the setting named")]
    else:
        findings = run_doctor(settings, st.config_path)
    render_findings(findings, fmt)
    if not healthy(findings):
        output.info(f"{sum(f.level == 'fail' for f in findings)} problem(s) to fix")
        raise typer.Exit(1)
    output.info("no problems found" if all(f.level == "ok" for f in findings)
                else "no problems found (see the warnings)")
