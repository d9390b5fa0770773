"""What the web console's tests share: a real ``fleetsched server`` (``tests.server.conftest``)
and ``Browsing``, an HTTP client signed in to the console with a token of a given role, as a
browser is (the session cookie and its CSRF token, forms posted as forms). The browser tests
drive a real Chromium instead (``tests/server/console/browser.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import Api, serve_api

__all__ = ["Browsing", "Console", "console", "sign_in"]


class Browsing:
    """An HTTP client signed in to the console of ``root`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, root: str, client: httpx.Client) -> None:
        self.root = root
        self.client = client

    @property
    def csrf(self) -> str:
        return self.client.cookies.get("fleetsched_csrf") or ""

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return self.client.get(f"{self.root}{path}", **kwargs)  # type: ignore[arg-type]

    def post(self, path: str, data: dict[str, str] | None = None, *, csrf: bool = True,
             **kwargs: object) -> httpx.Response:
        """Post ``data`` as a form, with the session's CSRF token unless ``csrf`` is False."""
        fields = {**({"csrf_token": self.csrf} if csrf else {}), **(data or {})}
        return self.client.post(f"{self.root}{path}", data=fields,  # type: ignore[arg-type]
                                **kwargs)


def sign_in(root: str, token: str) -> Browsing:
    """A new client signed in with ``token`` through the sign-in form."""
    client = httpx.Client(timeout=30, follow_redirects=False)
    page = client.get(f"{root}/ui/login")
    check = re.search(r'name="check" value="([^"]+)"', page.text)
    assert check, page.text[:500]
    reply = client.post(f"{root}/ui/login", data={"check": check.group(1), "next": "/ui/",
                                                   "token": token})
    assert reply.status_code == 303, reply.text[:500]
    return Browsing(root, client)


class Console:
    """A running server (``api``) and a way to sign in with a token of any role."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.root = api.base.removesuffix("/api/v1")
        self.signed_in = 0
        self.clients: list[httpx.Client] = []

    def as_role(self, role: str, *, tenant: str | None = None, owner: str | None = None,
                name: str | None = None) -> Browsing:
        self.signed_in += 1
        args = [name or f"{role}-{tenant or 'team'}-{self.signed_in}", "--role", role]
        args += ["--tenant", tenant] if tenant else []
        args += ["--owner", owner] if owner else []
        return self.signed(self.api.token(*args))

    def signed(self, token: str) -> Browsing:
        """A client signed in with ``token``, closed with the fixture."""
        browsing = sign_in(self.root, token)
        self.clients.append(browsing.client)
        return browsing

    def close(self) -> None:
        for client in self.clients:
            client.close()


@pytest.fixture
def console(tmp_path: Path, redis_url: str) -> Iterator[Console]:
    """The console of a server on a SQLite record with five hosts in group ``web``."""
    with serve_api(tmp_path, redis_url, f"sqlite:///{tmp_path / 'record.db'}") as served:
        made = Console(served)
        try:
            yield made
        finally:
            made.close()


# The browser tests' fixtures (a Chromium per module, a page per test), for every module here.
from tests.server.console.browser import browser_page, chromium, worker_node  # noqa: F401
