"""``fleetsched exporter``: one process serving the fleet's gauges to Prometheus.

1. Log like a worker (``scheduler.logs``: text or JSON lines, credentials masked).
2. Register a :class:`scheduler.monitoring.fleet.FleetCollector` in a registry of its own (no
   process or platform metrics: those are the workers'), with a read-only engine on the record.
3. Serve ``/metrics`` with prometheus_client's HTTP server; every scrape reads afresh.
4. Run until SIGTERM or SIGINT, then stop the server and dispose of the engine.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from scheduler.config import Settings
from scheduler.errors import ConfigError
from scheduler.logs import configure
from scheduler.monitoring.fleet import FleetCollector
from scheduler.redact import UrlRedactingFilter

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 9465  # next to the node exporters' 9100s; unassigned in Prometheus' port list
DEFAULT_TIMEOUT_S = 3.0


def registry_for(settings: Settings, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[
        CollectorRegistry, Any]:
    """A registry holding the fleet collector, and the engine it reads the record with."""
    from scheduler.record.engine import make_engine

    # A statement that runs past the scrape's timeout is cancelled by PostgreSQL itself (a lock
    # wait, a slow plan); a pooled connection is waited for no longer than that either.
    options: dict[str, Any] = {"pool_timeout": timeout_s}
    if settings.effective_database_url.startswith("postgresql"):
        options["connect_args"] = {"options": f"-c statement_timeout={int(timeout_s * 1000)}"}
    engine = make_engine(settings.effective_database_url, readonly=True, **options)
    registry = CollectorRegistry()
    registry.register(FleetCollector(settings, timeout_s, engine))
    return registry, engine


def serve(settings: Settings, address: str, port: int, timeout_s: float,
          on_started: Callable[[int], None] | None = None) -> None:
    """Serve until a signal; ``on_started`` is told the port listened on."""
    configure(settings.log_level, settings.log_format, [UrlRedactingFilter(settings)])
    registry, engine = registry_for(settings, timeout_s)
    try:
        server, _thread = start_http_server(port, address, registry=registry)
    except OSError as exc:
        engine.dispose()
        raise ConfigError(f"cannot listen on {address}:{port}: {exc.strerror or exc}",
                          hint="choose a free --port") from None
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM,
                                                                      signal.SIGINT)}
    try:
        if on_started is not None:
            on_started(server.server_port)
        while not stop.wait(0.5):
            pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        server.shutdown()
        server.server_close()
        engine.dispose()
