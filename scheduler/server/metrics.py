"""The API's Prometheus metrics, served at ``/metrics`` (outside ``/api/v1``, no token, like the
workers' and the exporter's endpoints: docs/guides/monitoring.md).

1. One registry per application (``create_app``), so two apps in one process never share
   counts: the request counter and latency histogram by method, route template and status,
   the refused authentications, the SSE streams, and the process' own figures (RSS, CPU,
   open files).
2. ``observe(...)``: what the request middleware (``scheduler.server.observe``) tells it once
   per request. The route is the template (``/api/v1/tasks/{task_id}``), never the raw path:
   each label value is a series Prometheus keeps, and ids keep coming; a path no route matches
   is ``unmatched``.
3. SSE: the event streams open now and the tasks they follow, read at each scrape from the
   counts ``scheduler.server.events`` keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge,
                               Histogram, ProcessCollector, generate_latest)
from starlette.responses import Response

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["PATH", "ServerMetrics"]

PATH = "/metrics"
# Seconds; dense around the 50 ms target of a read (docs/benchmarks.md, "HTTP API").
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def following(count: str) -> Callable[[], int]:
    """A reading of ``scheduler.server.events``' count ``count`` (``FOLLOWERS``: event streams
    open; ``FEEDS``: tasks followed, one poller each), at each scrape."""

    def read() -> int:
        from scheduler.server import events

        return int(getattr(events, count))

    return read


class ServerMetrics:
    """The metrics of one application, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ("method", "route", "status")
        self.requests = Counter("fleetsched_server_requests_total",
                                "HTTP requests answered, by method, route template and status",
                                labels, registry=self.registry)
        self.latency = Histogram("fleetsched_server_request_duration_seconds",
                                 "Time from a request's arrival to its last byte, by method, "
                                 "route template and status", labels, buckets=BUCKETS,
                                 registry=self.registry)
        self.unauthenticated = Counter(
            "fleetsched_server_auth_failures_total",
            "Requests refused for their token (401: none, unknown, expired or revoked)",
            registry=self.registry)
        Gauge("fleetsched_server_sse_followers", "Event streams (SSE) open now",
              registry=self.registry).set_function(following("FOLLOWERS"))
        Gauge("fleetsched_server_sse_feeds", "Tasks followed by SSE now, each read by one "
              "poller whatever its followers", registry=self.registry
              ).set_function(following("FEEDS"))
        ProcessCollector(registry=self.registry)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)
        if status == 401:
            self.unauthenticated.inc()

    def endpoint(self, _request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
