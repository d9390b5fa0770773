"""The web console (``/ui``): server-rendered pages over the same verbs as the API and the CLI,
for people who would rather look than type (docs/guides/web-console.md).

``install(app)`` adds the pages, their stylesheet and script (``/ui/static``), the sign-in's
redirect and ``/`` -> ``/ui/``. No build step: Jinja2 templates and one small script that
follows Server-Sent Events. Each page module owns one page family:

- ``signin``: sign in (single sign-on, or a token) and out;
- ``fleet``: Fleet now, live;
- ``tasks``: the task list, a task's page (plan, progress by state and wave, its hosts paged and
  filtered on the server, each host's attempts and output) and its control buttons;
- ``submit``: the submit form, its dry-run plan, then the confirmation;
- ``calendar``: windows and freezes per group over the coming weeks, and schedules;
- ``hosts``: the host search and a host's history;
- ``audit``: the report, with CSV and JSON downloads;
- ``customer``: a customer's hosts, its windows waiting for approval, its freezes and tasks.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from scheduler.server.console.web import HERE, PREFIX, SignInRequired

__all__ = ["PREFIX", "install"]


def install(app: FastAPI) -> None:
    """Add the console to ``app`` (see the module docstring)."""
    from urllib.parse import quote

    from scheduler.server.console import (
        audit,
        calendar,
        customer,
        fleet,
        hosts,
        signin,
        submit,
        tasks,
        windows,
    )

    for module in (signin, fleet, submit, hosts, audit, customer, windows, calendar, tasks):
        app.include_router(module.router, prefix=PREFIX, include_in_schema=False)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=HERE / "static"), name="console-static")

    async def sign_in_first(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SignInRequired)
        return RedirectResponse(f"{PREFIX}/login?next={quote(exc.next_page, safe='')}",
                                status_code=303)

    app.add_exception_handler(SignInRequired, sign_in_first)

    @app.get("/", include_in_schema=False)
    def home() -> Any:
        return RedirectResponse(f"{PREFIX}/", status_code=303)
