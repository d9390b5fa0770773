"""``fleetsched server`` as a process: its logging, its TLS files, and uvicorn around the app.

1. Log like the other long-running processes (``scheduler.logs``: JSON lines or text, URL
   credentials masked), uvicorn's own loggers included; uvicorn's access log is off, the
   API's own (``scheduler.server.access_log``) says more and never the query string.
2. Check the TLS certificate and key before the port opens: a file missing or unreadable, or a
   key that is not the certificate's, is one line (``ConfigError``), not a traceback.
3. Check the record's schema, then serve until SIGTERM or SIGINT (waiting at most
   ``SHUTDOWN_GRACE_S`` for the requests still open); then close the record's and the
   queue's connections the app held.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.errors import ConfigError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from scheduler.config import Settings

__all__ = ["SHUTDOWN_GRACE_S", "check_tls", "prepare", "serve"]

# A task's event stream (GET /tasks/{id}/events) never ends on its own before the task does:
# on SIGTERM uvicorn waits this long for open requests, then cancels them (a follower
# reconnects, with Last-Event-ID, to the next server). Without it, a stop waits for every task
# followed to end.
SHUTDOWN_GRACE_S = 5


def check_tls(cert: str, key: str) -> None:
    """Refuse, in one line, TLS files the server could not serve with."""
    for name, path in (("certificate", cert), ("private key", key)):
        try:
            Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"TLS {name} {path}: {exc.strerror or exc}",
                              hint="check the path and that the server's user may read it"
                              ) from None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key, password=lambda: b"")
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"TLS certificate {cert} and key {key} cannot be used together: "
                          f"{getattr(exc, 'reason', None) or exc}",
                          hint="both in PEM; the key must be the certificate's (and not "
                               "encrypted)") from None


def prepare(settings: Settings) -> FastAPI:
    """The app, ready to serve: TLS files checked, logging configured, the record's schema
    checked (a record that is missing or behind is refused before the port opens)."""
    from scheduler.logs import configure
    from scheduler.redact import UrlRedactingFilter
    from scheduler.server.app import create_app

    if settings.server_tls_cert and settings.server_tls_key:
        check_tls(settings.server_tls_cert, settings.server_tls_key)
    configure(settings.log_level, settings.log_format, [UrlRedactingFilter(settings)])
    app = create_app(settings)
    with app.state.stores.database():
        pass
    return app


def serve(app: FastAPI, settings: Settings, *, host: str, port: int) -> None:
    """Serve ``app`` until SIGTERM or SIGINT; HTTPS when the settings name a certificate."""
    import uvicorn

    try:
        # h11, whatever else is installed: its 16 KiB limit on a request's head is one of the
        # server's limits (docs/guides/server.md, "Limits and headers"); httptools has none.
        uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, http="h11",
                    server_header=False, ssl_certfile=settings.server_tls_cert,
                    ssl_keyfile=settings.server_tls_key,
                    timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    finally:
        app.state.stores.close()
