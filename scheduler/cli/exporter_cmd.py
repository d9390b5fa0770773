"""``fleetsched exporter``: serve the fleet's gauges to Prometheus until SIGTERM or SIGINT.

Thin: parse the flags, call ``scheduler.monitoring.serve``. Exit code 0 after a signal.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.monitoring.exporter import DEFAULT_ADDRESS, DEFAULT_PORT, DEFAULT_TIMEOUT_S

EPILOG = f"""Examples:

  fleetsched exporter

  fleetsched exporter --address 0.0.0.0 --port {DEFAULT_PORT}

Run one per fleet (every worker node serves its own metrics with --metrics-port). Each scrape reads Redis and the SQL record afresh, every Redis command bounded by --timeout; Redis down answers fleetsched_up 0, never an error page. Metrics, alert rules and a dashboard: docs/guides/monitoring.md.
"""


def exporter(
    ctx: typer.Context,
    address: Annotated[str, typer.Option(help="Address to listen on.")] = DEFAULT_ADDRESS,
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one, printed).", min=0, max=65535)] = DEFAULT_PORT,
    timeout: Annotated[float, typer.Option(help="Seconds one scrape waits for Redis at most.", min=0.1, max=60)] = DEFAULT_TIMEOUT_S,
    log_format: Annotated[str | None, typer.Option(help="Log lines as json, text, or auto (default: the log_format setting).")] = None,
) -> None:
    """Serve fleet-wide gauges (queue depth, overdue, recorder lag, workers) at /metrics."""
    from scheduler.config import replace
    from scheduler.errors import ConfigError, ValidationError
    from scheduler.monitoring import serve

    settings = state(ctx).settings
    if log_format is not None:
        try:
            settings = replace(settings, log_format=log_format)
        except ConfigError as exc:
            raise ValidationError(str(exc), hint="run fleetsched exporter --help") from None

    def started(bound: int) -> None:
        output.service_info("fleetsched.exporter",
                            f"exporter: metrics on http://{address}:{bound}/metrics")

    serve(settings, address, port, timeout, on_started=started)
