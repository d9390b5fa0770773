"""The web console's browser tests' harness: a real Chromium (Debian's
``chromium-headless-shell``) driven by Playwright's sync API, on the ``console`` fixture's
real server.

1. ``chromium_binary()`` finds the browser; without it the browser tests fail under
   ``CI=true`` and are skipped with the reason elsewhere (``tests.servers.missing``), as for
   every other real component. Playwright cannot download its own browser on these machines:
   it is launched through ``executable_path``.
2. ``chromium``: one browser per test module (each pytest-xdist worker launches its own),
   closed with the module; ``browser_page``: a fresh context (no cookies) and page per test,
   1280x800, with the ``console`` beside it (the module's server, ``conftest.py``) and the
   page's script errors collected.
3. ``InBrowser.sign_in(role)`` signs in through the real sign-in form with a new token of
   that role; ``sign_in_with(page, root, token)`` does it with a given token.
4. ``screenshot(page, name)`` writes ``docs/images/console-NAME.png`` when
   ``FLEETSCHED_SCREENSHOTS=1`` (so a CI run never rewrites the docs).
5. ``worker_node``: ``start()`` starts a worker node on the console's deployment, for the
   scenarios whose tasks run (``tests.server.conftest.worker_nodes``).

``conftest.py`` of this folder gives every test module here these fixtures.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.server.conftest import worker_nodes
from tests.servers import missing

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

    from tests.server.console.conftest import Console

__all__ = ["WAIT_MS", "InBrowser", "browser_page", "chromium", "chromium_binary", "screenshot",
           "sign_in_with", "worker_node"]

# The browser's own places, then Debian's wrapper script's target.
CANDIDATES = ("chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell")
WAIT_MS = 30_000  # every wait for the page: generous, the CI machine is loaded
VIEWPORT = {"width": 1280, "height": 800}
# What Chromium logs for a page answered 4xx (a refusal a test asked for), not a script's error.
REFUSED_PAGE = "Failed to load resource: the server responded with a status of 4"
IMAGES = Path(__file__).resolve().parents[3] / "docs" / "images"


def chromium_binary() -> str | None:
    """The path of ``chromium-headless-shell`` (``FLEETSCHED_TEST_CHROMIUM`` overrides)."""
    for name in (os.environ.get("FLEETSCHED_TEST_CHROMIUM", ""), *CANDIDATES):
        found = name and shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """A headless Chromium for the module's tests."""
    binary = chromium_binary()
    if binary is None:
        missing("chromium-headless-shell",
                "apt-get install --no-install-recommends chromium-headless-shell")
    from playwright.sync_api import sync_playwright

    # As root (CI containers) Chromium refuses to start with its sandbox on.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=binary, headless=True, args=args)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class InBrowser:
    """A page in a fresh browser context, and the console's server it browses."""

    page: Page
    console: Console
    errors: list[str] = field(default_factory=list)  # script errors, CSP refusals

    @property
    def root(self) -> str:
        return self.console.root

    def go(self, path: str) -> None:
        self.page.goto(f"{self.root}{path}")

    def sign_in(self, role: str, *, tenant: str | None = None, owner: str | None = None,
                next_page: str = "/ui/") -> str:
        """Sign in through the form with a new token of ``role``; returns the token."""
        args = ["--role", role]
        args += ["--tenant", tenant] if tenant else []
        args += ["--owner", owner] if owner else []
        token = self.console.token(f"{role}-{tenant or 'team'}-browser", *args)
        sign_in_with(self.page, self.root, token, next_page)
        return token


def sign_in_with(page: Page, root: str, token: str, next_page: str = "/ui/") -> None:
    """Type ``token`` in the sign-in form and wait to be sent on to ``next_page``."""
    from urllib.parse import quote

    page.goto(f"{root}/ui/login?next={quote(next_page, safe='')}")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url(lambda url: "/ui/login" not in url, timeout=WAIT_MS)


@pytest.fixture
def browser_page(chromium: Browser, console: Console) -> Iterator[InBrowser]:
    context = chromium.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    seen = InBrowser(page, console)

    def ours() -> bool:  # another site's page (an identity provider's) is not the console's
        return page.url.startswith(console.root)

    page.on("pageerror", lambda exc: seen.errors.append(f"script: {exc}") if ours() else None)
    page.on("console", lambda msg: seen.errors.append(f"console: {msg.text}")
            if msg.type == "error" and not msg.text.startswith(REFUSED_PAGE) and ours()
            else None)
    try:
        yield seen
    finally:
        context.close()


def screenshot(page: Page, name: str, at: Locator | None = None) -> None:
    """``docs/images/console-NAME.png`` of the viewport (scrolled to ``at``'s top), with
    ``FLEETSCHED_SCREENSHOTS=1``."""
    if os.environ.get("FLEETSCHED_SCREENSHOTS") != "1":
        return
    if at is not None:
        at.evaluate("element => element.scrollIntoView({block: 'start'})")
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / f"console-{name}.png"), full_page=False)


@pytest.fixture
def worker_node(console: Console, tmp_path: Path) -> Iterator[Callable[[], None]]:
    with worker_nodes(tmp_path, console.redis_url, console.api.database_url) as start:
        yield start
