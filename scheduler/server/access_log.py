"""The API's access log: one line per request on the ``fleetsched.server.access`` logger, in the
process' log format (``scheduler.logs``: JSON lines or text).

The fields: ``method``, ``route`` (the template, ``/api/v1/tasks/{task_id}``), ``path`` (without
its query string), ``status``, ``duration_ms``, ``client`` (the peer's address: the proxy's,
unless uvicorn's ``--forwarded-allow-ips`` trusts it), and once the token was checked
``principal`` and ``via`` (``token:<id>``). Never a header (the token is in Authorization), a
cookie, a query string or a body: what a request carries stays out of the log.

The logger logs at INFO whatever ``log_level`` says (an access log that a quiet level silences
is no access log); the process' other lines follow ``log_level``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler.logs import job_context

if TYPE_CHECKING:
    from scheduler.principal import Principal

__all__ = ["LOGGER", "write"]

LOGGER = "fleetsched.server.access"
log = logging.getLogger(LOGGER)
log.setLevel(logging.INFO)


def write(*, method: str, route: str, path: str, status: int, seconds: float,
          client: str | None, principal: Principal | None) -> None:
    """Log one answered request."""
    fields = {"method": method, "route": route, "path": path, "status": status,
              "duration_ms": round(seconds * 1000, 2), "client": client,
              "principal": principal.name if principal else None,
              "via": principal.via if principal else None}
    with job_context(**fields):
        log.info("%s %s %d", method, path, status)
