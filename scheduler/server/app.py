"""The HTTP API's application: ``create_app(settings)`` (the process around it is
``scheduler.server.service``).

Every route of the API lives under ``/api/v1``; the OpenAPI document is
``/api/v1/openapi.json``. No interactive docs page: it would load scripts from a CDN. The web
console's pages are ``/ui`` (``scheduler.server.console``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI

from scheduler.server import errors, fleet, reports, schedules, tasks, tenants, tokens, windows
from scheduler.server import templates
from scheduler.server import events, inventory, live, output_stream, task_jobs
from scheduler.verbs.stores import Stores
from scheduler.server import hardening, read_cache, sso  # sign-on; limits, headers; cache
from scheduler.server import console

if TYPE_CHECKING:
    from scheduler.config import Settings

__all__ = ["PREFIX", "create_app"]

PREFIX = "/api/v1"


def create_app(settings: Settings) -> FastAPI:
    """The API of the deployment ``settings`` name."""
    from importlib.metadata import version

    app = FastAPI(title="fleetsched", version=version("fleetsched"),
                  description="Operations jobs for a fleet of hosts. Every request carries "
                              "`Authorization: Bearer fst_...` (`fleetsched tokens create`).",
                  openapi_url=f"{PREFIX}/openapi.json", docs_url=None, redoc_url=None)
    app.state.stores = Stores(settings, hold=True)  # one pool for every request
    app.state.read_cache = read_cache.ReadCache(settings.server_read_cache_ms / 1000)
    api = APIRouter(prefix=PREFIX)
    # Before fleet's, whose /hosts/{name} would take /hosts/export for a host's name.
    for router in (task_jobs.router, events.router, events.status, live.router,
                   output_stream.router, inventory.router):
        api.include_router(router)
    for router in (tasks.router, tasks.jobs, fleet.router, windows.router, schedules.router,
                   templates.router, reports.router, tenants.router, tokens.router):
        api.include_router(router)
    app.include_router(api)
    app.include_router(sso.router, prefix=PREFIX)
    console.install(app)  # the web console's pages, /ui
    app.add_middleware(read_cache.WriteGeneration, cache=app.state.read_cache)
    app.add_middleware(hardening.Hardening)  # inside the access log, which sees its 413, 429
    errors.install(app)
    _observe(app)
    return app


def _observe(app: FastAPI) -> None:
    """``/metrics`` (outside ``/api/v1``, no token), and every request timed, counted and
    logged once (``scheduler.server.observe``)."""
    from scheduler.server.metrics import PATH, ServerMetrics
    from scheduler.server.observe import Observe

    app.state.metrics = ServerMetrics()
    app.add_route(PATH, app.state.metrics.endpoint, include_in_schema=False)
    app.add_middleware(Observe, metrics=app.state.metrics)

