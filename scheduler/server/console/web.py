"""What every page of the web console shares: who is looking (``Viewer``, from the session
cookie), the role check of a page's verb, the CSRF check of a form, and ``render``.

1. A page needs a session (single sign-on or a token's sign-in, ``scheduler.server.sso``):
   without one the browser is sent to ``/ui/login`` (``SignInRequired``), and back after.
2. A page names the verb it shows (``tasks.list``) and a button the verb it calls; the
   role table of ``scheduler.access.roles`` decides both, as for the API and the CLI: a page
   is never a second place where a rule lives.
3. Every form that changes something carries the session's CSRF token as the field
   ``csrf_token`` and is refused (403) without it: a page of another site cannot post one.
4. Every page is sent with a content security policy that allows this server's own scripts,
   styles and forms only (no inline script, no CDN, no framing).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from scheduler.errors import ForbiddenError, UnauthenticatedError, ValidationError
from scheduler.principal import Principal
from scheduler.reports.attempts import shown_exit
from scheduler.server.auth import stores_of
from scheduler.server.sso import SESSION_COOKIE
from scheduler.verbs import access, sso

__all__ = [
    "CSP",
    "PREFIX",
    "SignInRequired",
    "Viewer",
    "error_page",
    "form",
    "page_viewer",
    "render",
    "templates",
    "viewer",
]

PREFIX = "/ui"
HERE = Path(__file__).parent
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
MAX_FORM_BYTES = 256 * 1024  # a form's body; the server's limit (hardening) is the outer one


class SignInRequired(Exception):
    """No live session: the browser goes to the sign-in page, then back to ``next``."""

    def __init__(self, next_page: str) -> None:
        super().__init__(next_page)
        self.next_page = next_page


@dataclass(frozen=True)
class Viewer:
    """Who looks at a page: the session's principal and the CSRF token its forms carry."""

    principal: Principal
    csrf: str

    def may(self, verb: str) -> bool:
        """Whether the role allows ``verb`` (the buttons a page shows)."""
        try:
            access.authorize(self.principal, verb)
        except ForbiddenError:
            return False
        return True

    @property
    def customer(self) -> str | None:
        return self.principal.tenant


def viewer(request: Request) -> Viewer:
    """The request's viewer (``SignInRequired`` without a live session). An address holding
    a NUL character is refused first: PostgreSQL takes none in a text, and every page's
    filters and names reach its queries."""
    if "\x00" in request.url.path or "\x00" in unquote(request.url.query):
        raise ValidationError("the address holds a NUL character")
    session_id = request.cookies.get(SESSION_COOKIE)
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if not session_id:
        raise SignInRequired(here)
    try:
        session = sso.session_of(stores_of(request), session_id)
    except UnauthenticatedError:
        raise SignInRequired(here) from None
    who = replace(session.principal, source=request.client.host if request.client else None)
    request.state.principal = who  # the access log names who asked
    return Viewer(principal=who, csrf=session.csrf)


def page_viewer(verb: str) -> Any:
    """A dependency: the viewer, if its role may call ``verb`` (else ``ForbiddenError``)."""

    def dependency(request: Request) -> Viewer:
        seen = viewer(request)
        access.authorize(seen.principal, verb)
        return seen

    return dependency


async def form(request: Request, seen: Viewer) -> dict[str, str]:
    """The posted form's fields (the last value of each), after its CSRF check."""
    raw = await request.body()
    if len(raw) > MAX_FORM_BYTES:
        raise ForbiddenError("the form is too large")
    fields = {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace"),
                                            keep_blank_values=True).items()}
    sent = fields.pop("csrf_token", "")
    if not secrets.compare_digest(sent.encode(), seen.csrf.encode()):
        raise ForbiddenError("this form has no valid CSRF token (reload the page and try again)")
    if any("\x00" in k or "\x00" in v for k, v in fields.items()):
        raise ValidationError("the form holds a NUL character")
    return fields


templates = Environment(loader=FileSystemLoader(HERE / "templates"),
                        autoescape=select_autoescape(default=True, default_for_string=True),
                        trim_blocks=True, lstrip_blocks=True)
templates.filters["q"] = lambda value: quote(str(value), safe="")
# `{{ j.exit_code|exit_code(j.error) }}`: a number, a signal's name (SIGKILL) or ""
templates.filters["exit_code"] = lambda code, error=None: shown_exit(code, error)


def render(request: Request, seen: Viewer | None, template: str, *, status: int = 200,
           **context: Any) -> HTMLResponse:
    """``template`` rendered for ``seen`` (None: the sign-in page), with the security headers
    of a page."""
    html = templates.get_template(template).render(
        request=request, viewer=seen, prefix=PREFIX, path=request.url.path, **context)
    return HTMLResponse(html, status_code=status, headers=page_headers())


def page_headers() -> dict[str, str]:
    return {"content-security-policy": CSP, "cache-control": "no-store"}


def error_page(request: Request, status: int, message: str, hint: str | None) -> HTMLResponse:
    """A refused or failed page: the error's one line and hint, in the page's frame."""
    try:
        seen: Viewer | None = viewer(request)
    except Exception:  # noqa: BLE001 - no session, or the record away: drawn without one
        seen = None
    titles = {400: "Not accepted", 401: "Sign in", 403: "Not allowed", 404: "Not found",
              409: "Not now", 422: "Not accepted", 503: "Unavailable"}
    # A refused form goes back to the page it was on (``/ui/windows/W/approve`` -> the window).
    path = request.url.path
    back = (path.rsplit("/", 1)[0] if request.method == "POST" and path.count("/") > 2
            else f"{PREFIX}/")
    return render(request, seen, "error.html", status=status,
                  title=titles.get(status, "Something went wrong"), message=message,
                  hint=hint, back=back)
