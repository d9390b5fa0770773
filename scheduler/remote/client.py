"""The CLI's connection to a ``fleetsched server`` in remote mode (``--server URL``).

1. :class:`Client` holds one ``httpx.Client`` for the command: the base URL's ``/api/v1``,
   the API token as a bearer header (from ``token``, or ``token_file`` read now), timeouts,
   TLS verification on, redirects never followed (a redirect could carry the token elsewhere).
2. Every answer that is not a success is raised as the error the verb would raise locally:
   the server's JSON error carries the CLI's message, hint and exit code
   (``scheduler.server.errors``), so the command prints the same one line and exits the same.
3. A server that does not answer is one line naming the URL (never the token).
4. :meth:`Client.events` reads a Server-Sent Events stream (``tasks wait``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler import errors as e

if TYPE_CHECKING:
    import httpx

    from scheduler.config import Settings

__all__ = ["Client", "RemoteUnavailableError"]

CONNECT_S = 5.0  # reaching the server; a verb's answer may take longer (READ_S)
READ_S = 120.0


class RemoteUnavailableError(e.FleetschedError):
    """The server named by ``--server`` (or the ``server`` setting) did not answer."""


def _token(settings: Settings) -> str:
    if settings.token:
        return settings.token.strip()
    if settings.token_file:
        path = Path(settings.token_file).expanduser()
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise e.ConfigError(f"token_file {path}: cannot read it ({type(exc).__name__})",
                                hint="name a readable file holding the API token") from None
        if token:
            return token
        raise e.ConfigError(f"token_file {path} is empty",
                            hint="write the token `fleetsched tokens create` printed into it")
    raise e.ConfigError(f"remote mode ({settings.server}) needs an API token",
                        hint="set FLEETSCHED_TOKEN or the token_file setting (see "
                             "docs/guides/server.md, \"Remote mode\")")


# The server's JSON writes a UTC time as ...Z where the CLI writes ...+00:00 (isoformat):
# turned back, the same rows print the same in both modes.
_UTC_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,6})?)?Z")


def _local_times(value: Any) -> Any:
    if isinstance(value, str):
        return value[:-1] + "+00:00" if _UTC_Z.fullmatch(value) else value
    if isinstance(value, list):
        return [_local_times(v) for v in value]
    if isinstance(value, dict):
        return {k: _local_times(v) for k, v in value.items()}
    return value


def _error(reply: httpx.Response) -> e.FleetschedError:
    """The server's JSON error as the FleetschedError subclass it names, with its exit code."""
    try:
        body = reply.json()["error"]
        code, kind, message, hint = (int(body["code"]), str(body["kind"]), str(body["message"]),
                                     body.get("hint"))
    except (ValueError, KeyError, TypeError):
        return e.FleetschedError(f"the server answered HTTP {reply.status_code} without an "
                                 "error it explains", hint="see the server's log")
    cls = getattr(e, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, e.FleetschedError)):
        cls = e.FleetschedError
    try:
        exc = cls(message, hint=hint)
    except TypeError:  # a class made otherwise (QueueError takes its script's code)
        exc = e.FleetschedError(message, hint=hint)
    exc.exit_code = code  # the CLI's code, as the server computed it
    return exc


class Client:
    """One command's calls to the server (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        import httpx

        assert settings.server is not None
        self.url = settings.server.rstrip("/")
        self.settings = settings
        self._http = httpx.Client(
            base_url=f"{self.url}/api/v1", verify=True, follow_redirects=False,
            timeout=httpx.Timeout(READ_S, connect=CONNECT_S),
            # no-cache: what the server answers a command is never its brief read cache's
            # (scheduler/server/read_cache.py), so a command prints what direct mode prints
            headers={"Authorization": f"Bearer {_token(settings)}",
                     "User-Agent": "fleetsched-cli", "Cache-Control": "no-cache"})

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        import httpx

        try:
            reply = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise RemoteUnavailableError(
                f"the server {self.url} did not answer in time",
                hint="the request may have been carried out: check before sending it again "
                     "(submit --idempotency-key makes a resend safe)") from None
        except httpx.HTTPError as exc:
            raise RemoteUnavailableError(
                f"cannot reach the server {self.url} ({type(exc).__name__})",
                hint="is `fleetsched server` running there? check --server or "
                     "FLEETSCHED_SERVER") from None
        if reply.is_success:
            return reply
        if reply.is_redirect:
            raise RemoteUnavailableError(
                f"the server {self.url} answered with a redirect, which is not followed",
                hint="give the server's own URL (https:// if it serves TLS)")
        raise _error(reply)

    def get(self, path: str, **params: Any) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        return _local_times(self._send("GET", path, params=query).json())

    def get_text(self, path: str, **params: Any) -> str:
        query = {k: v for k, v in params.items() if v is not None}
        return self._send("GET", path, params=query).text

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        return _local_times(self._send("POST", path, json=body, headers=headers).json())

    def delete(self, path: str) -> Any:
        return _local_times(self._send("DELETE", path).json())

    def patch(self, path: str, body: Any) -> Any:
        return _local_times(self._send("PATCH", path, json=body).json())

    def pages(self, path: str, **params: Any) -> list[Any]:
        """Every item of a paged list (``items``, ``next_offset``), up to ``limit`` in all
        when given."""
        wanted = params.pop("limit", None)
        items: list[Any] = []
        offset: int | None = 0
        while offset is not None and (wanted is None or len(items) < wanted):
            size = 1000 if wanted is None else min(1000, wanted - len(items))
            page = self.get(path, limit=size, offset=offset, **params)
            items += page["items"]
            offset = page.get("next_offset")
        return items

    def events(self, path: str, wait_s: float | None = None) -> Iterator[tuple[str, Any]]:
        """(event, data) of a Server-Sent Events stream until the server ends it; comments
        (heartbeats) and ``retry`` lines are skipped. ``TimeoutError`` when nothing came for
        ``wait_s`` (None: wait as long as the stream lasts)."""
        import httpx

        try:
            with self._http.stream("GET", path, timeout=httpx.Timeout(
                    None, connect=CONNECT_S, read=wait_s)) as reply:
                if not reply.is_success:
                    reply.read()
                    raise _error(reply)
                event, data = "message", []
                for line in reply.iter_lines():
                    if not line:
                        if data:
                            yield event, _local_times(json.loads("\n".join(data)))
                        event, data = "message", []
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
        except httpx.ReadTimeout:
            raise TimeoutError from None
        except httpx.HTTPError as exc:
            raise RemoteUnavailableError(
                f"lost the server {self.url} while following ({type(exc).__name__})",
                hint="wait again: the task goes on without you") from None
