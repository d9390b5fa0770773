"""``fleetsched server``: the HTTP API (``scheduler.server``), until stopped.

Listens on loopback unless ``--host`` says otherwise; serves HTTPS with ``--tls-cert`` and
``--tls-key`` (or the settings ``server_tls_cert``, ``server_tls_key``). Another address
without TLS is allowed (a TLS-terminating proxy in front of it) with a one-line warning.
``--openapi`` prints the OpenAPI document and exits. Guide: docs/guides/server.md.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import state

EPILOG = """Examples:

  fleetsched server

  fleetsched server --port 8642

  fleetsched server --host 0.0.0.0 --tls-cert /etc/fleetsched/tls/cert.pem --tls-key /etc/fleetsched/tls/key.pem

  fleetsched server --openapi > openapi.json

Metrics for Prometheus at /metrics; one log line per request (JSON when stderr is not a terminal, like the workers'). Guide: docs/guides/server.md.
"""


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def server(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (default: loopback only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8642,
    tls_cert: Annotated[str | None, typer.Option("--tls-cert", help="Serve HTTPS with this PEM certificate (chain after it); needs --tls-key. Default: the server_tls_cert setting.")] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key", help="The certificate's private key (PEM, not encrypted). Default: the server_tls_key setting.")] = None,
    log_format: Annotated[str | None, typer.Option(help="Log lines as json, text, or auto: JSON unless stderr is a terminal (default: the log_format setting).")] = None,
    openapi: Annotated[bool, typer.Option("--openapi", help="Print the OpenAPI document (JSON) and exit.")] = False,
) -> None:
    """Serve the HTTP API under /api/v1 (bearer tokens: `fleetsched tokens create`)."""
    from scheduler.config import replace
    from scheduler.errors import ConfigError, ValidationError
    from scheduler.server import openapi as openapi_doc
    from scheduler.server import service

    settings = state(ctx).settings
    changes = {k: v for k, v in (("server_tls_cert", tls_cert), ("server_tls_key", tls_key),
                                 ("log_format", log_format)) if v is not None}
    try:
        settings = replace(settings, **changes)
    except ConfigError as exc:
        raise ValidationError(str(exc), hint=exc.hint or "run fleetsched server --help") from None
    if openapi:
        output.emit_text(openapi_doc.document(settings))
        return
    app = service.prepare(settings)
    scheme = "https" if settings.server_tls_cert else "http"
    if scheme == "http" and not _loopback(host):
        output.service_info("fleetsched.server",
                            f"warning: listening on {host} without TLS: give --tls-cert and "
                            "--tls-key, or put a TLS-terminating proxy in front of it "
                            "(docs/guides/server.md)")
    output.service_info("fleetsched.server",
                        f"serving the HTTP API on {scheme}://{host}:{port}/api/v1")
    service.serve(app, settings, host=host, port=port)
