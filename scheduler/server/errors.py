"""Errors as JSON (as pages for the web console's ``/ui``): ``{"error": {"code": <the CLI's exit code>, "kind": ..., "message": ...,
"hint": ...}}`` with an HTTP status chosen by the error's class.

The message and hint are the CLI's one line each (``scheduler.errors``). An error that is no
``FleetschedError`` is a 500 whose body says nothing of it; the log has it, redacted.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from scheduler import errors as e
from scheduler.access.oidc import ProviderError
from scheduler.redact import redact_exception
from scheduler.server import headers

__all__ = ["install"]

log = logging.getLogger("fleetsched.server")

# Most specific first: a TaskNotActiveError is also a ValidationError.
STATUS: list[tuple[type[e.FleetschedError], int]] = [
    (e.UnauthenticatedError, 401),
    (e.ForbiddenError, 403),
    (e.NotFoundError, 404),
    (e.TaskNotActiveError, 409),
    (e.ConflictError, 409),
    (e.DeclinedError, 409),
    (e.ValidationError, 400),
    (e.ConfigError, 400),
    (e.RedisUnavailableError, 503),
    (e.DatabaseUnavailableError, 503),
    (ProviderError, 502),  # the identity provider of single sign-on
]


def body(code: int, kind: str, message: str, hint: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "kind": kind, "message": message, "hint": hint}}


def _console(request: Request) -> bool:
    """Whether the request is for a page of the web console, which answers errors as pages."""
    from scheduler.server.console import PREFIX

    if getattr(request.state, "console", False):  # a console's single sign-on refused (sso)
        return True
    return request.url.path == PREFIX or request.url.path.startswith(PREFIX + "/")


def _fleetsched(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, e.FleetschedError)
    status = next((s for cls, s in STATUS if isinstance(exc, cls)), 500)
    if _console(request):
        from scheduler.server.console.web import error_page

        return error_page(request, status, str(exc), exc.hint)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body(exc.exit_code, type(exc).__name__, str(exc), exc.hint),
                        status_code=status, headers=headers)


def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    message = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request"
    if _console(request):
        from scheduler.server.console.web import error_page

        return error_page(request, 422, message, None)
    return JSONResponse(body(e.ValidationError.exit_code, "ValidationError", message,
                             "see /api/v1/openapi.json"), status_code=422)


def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if _console(request):
        from scheduler.server.console.web import error_page

        return error_page(request, exc.status_code, str(exc.detail), None)
    return JSONResponse(body(4 if exc.status_code == 404 else 1, "HTTPError", str(exc.detail)),
                        status_code=exc.status_code)


def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected %s: %s", type(exc).__name__, redact_exception(exc))
    return JSONResponse(body(1, "InternalError", "internal error (see the server's log)"),
                        status_code=500, headers=headers.as_dict())


def install(app: Any) -> None:
    """Register the handlers on the FastAPI ``app``."""
    app.add_exception_handler(e.FleetschedError, _fleetsched)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
