"""A worker node's Prometheus metrics, counted in the master, served on ``--metrics-port``.

Every number comes from where the master already learns it, so the children stay as they are
and no multiprocess mode (files per process, merged at scrape) is needed:

1. Job outcomes: the node's own counters (``workers.stats.NodeStats.add``) call :meth:`counted`,
   so the metric and the node's presence (``acked``, ``failed`` in ``fleetsched worker list``)
   are one count.
2. Job duration: each ``done`` outcome a child sends the finisher carries it (``Outcome``).
3. Queue wait (claim time minus due time, on the Redis clock) and the claim's round trip: the
   claim loop.
4. SSH errors by reason: the class of the exception a job failed with (``Outcome.error_type``).
5. Slots and busy slots: read from the slot table when scraped.

Labels are bounded: ``outcome`` and ``reason`` only. No host or task label: a fleet has
thousands of hosts and tasks never stop coming. The HTTP server is prometheus_client's, in a
daemon thread of its own; observing a counter or a histogram is a lock and an add, so the claim
path pays nothing more. :data:`NO_METRICS` stands in when the endpoint is off, and
prometheus_client is imported only when it is on (a node's start-up does not pay for it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.slots import Slots

log = logging.getLogger(__name__)

NAMESPACE = "fleetsched"

# NodeStats counter -> the outcome label of fleetsched_jobs_finished_total.
OUTCOMES = {"acked": "succeeded", "failed": "failed", "retried": "retried",
            "released": "released", "deferred": "deferred", "lost_seen": "lost"}

# The exception classes a job can fail with on the way to a host -> the reason label.
SSH_REASONS = {"HostUnreachableError": "unreachable", "AuthenticationError": "auth",
               "HostKeyError": "host_key", "BecomeError": "become"}

DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)


class NodeMetrics:
    """The node's metrics in a registry of their own (nothing global, one per node)."""

    def __init__(self, slots: Slots) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.finished = Counter("jobs_finished", "Jobs this node ended, by outcome (succeeded, "
                                "failed, retried, released, deferred; lost: jobs this node's "
                                "claims found lost by their worker).", ["outcome"],
                                namespace=NAMESPACE, registry=r)
        for outcome in OUTCOMES.values():
            self.finished.labels(outcome)  # every series exists from the start, at 0
        self.claimed = Counter("jobs_claimed", "Jobs this node claimed.", namespace=NAMESPACE,
                               registry=r)
        self.timeouts = Counter("job_timeouts", "Jobs this node stopped past their timeout.",
                                namespace=NAMESPACE, registry=r)
        self.child_deaths = Counter("child_deaths", "Child processes that died with jobs "
                                    "running.", namespace=NAMESPACE, registry=r)
        self.duration = Histogram("job_duration_seconds", "How long jobs ran in a child, "
                                  "seconds.", namespace=NAMESPACE, registry=r,
                                  buckets=DURATION_BUCKETS)
        self.wait = Histogram("job_queue_wait_seconds", "Claim time minus due time, seconds "
                              "(Redis clock).", namespace=NAMESPACE, registry=r,
                              buckets=WAIT_BUCKETS)
        self.claim = Histogram("claim_latency_seconds", "Round trip of one claim script call, "
                               "seconds.", namespace=NAMESPACE, registry=r,
                               buckets=CLAIM_BUCKETS)
        self.ssh_errors = Counter("ssh_errors", "Jobs that failed reaching their host, by "
                                  "reason (unreachable, auth, host_key, become).", ["reason"],
                                  namespace=NAMESPACE, registry=r)
        for reason in SSH_REASONS.values():
            self.ssh_errors.labels(reason)
        Gauge("slots", "Jobs this node runs at once at most.", namespace=NAMESPACE,
              registry=r).set_function(lambda: slots.size)
        Gauge("slots_busy", "Jobs running on this node now.", namespace=NAMESPACE,
              registry=r).set_function(lambda: len(slots))
        self._by_stat = {name: self.finished.labels(outcome) for name, outcome in OUTCOMES.items()}
        self._by_stat.update(claimed=self.claimed, timed_out=self.timeouts,
                             children_died=self.child_deaths)

    def counted(self, counts: dict[str, int]) -> None:
        """``NodeStats.add``'s counts, added to the matching counters."""
        for name, n in counts.items():
            metric = self._by_stat.get(name)
            if metric is not None and n > 0:
                metric.inc(n)

    def job_done(self, duration_ms: int, error_type: str | None) -> None:
        self.duration.observe(duration_ms / 1000)
        reason = SSH_REASONS.get(error_type or "")
        if reason is not None:
            self.ssh_errors.labels(reason).inc()

    def claimed_jobs(self, now_ms: int, due_ms: list[int], seconds: float) -> None:
        """One claim: its round trip, and each job's wait since its due time."""
        self.claim.observe(seconds)
        for due in due_ms:
            if due:
                self.wait.observe(max(0, now_ms - due) / 1000)

    def serve(self, port: int, address: str) -> Any:
        """Start the HTTP endpoint (``/metrics``) in a daemon thread; returns the server."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, address, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", address, server.server_port)
        return server


class _NoMetrics:
    """The endpoint is off: every hook does nothing."""

    def counted(self, counts: dict[str, int]) -> None:
        pass

    def job_done(self, duration_ms: int, error_type: str | None) -> None:
        pass

    def claimed_jobs(self, now_ms: int, due_ms: list[int], seconds: float) -> None:
        pass


NO_METRICS: Any = _NoMetrics()
