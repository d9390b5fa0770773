"""``fleetsched server``: the HTTP API (``scheduler.server``), until stopped.

Listens on loopback unless ``--host`` says otherwise; there is no TLS yet, so anything else
belongs behind a TLS-terminating proxy. Guide: docs/guides/server.md.
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
) -> None:
    """Serve the HTTP API under /api/v1 (bearer tokens: `fleetsched tokens create`)."""
    from scheduler.server.app import serve

    if not _loopback(host):
        output.info(f"warning: listening on {host} without TLS: put a TLS-terminating proxy in "
                    "front of it (docs/guides/server.md)")
    output.service_info("fleetsched.server",
                        f"serving the HTTP API on http://{host}:{port}/api/v1")
    serve(state(ctx).settings, host=host, port=port)
