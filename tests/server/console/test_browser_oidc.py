"""Signing in to the web console by single sign-on in a real browser, against a real OpenID
Connect provider process (``oidc-provider-mock``, the fixtures of tests/server/test_oidc.py):
the sign-in page's button, the server's redirect to the provider, the provider's own login
form filled in the browser, the callback, and back on the console's page asked for; a person
the provider knows but fleetsched gives no role is refused on a console page. Both tests
browse the module's server, started with the provider's settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.server.conftest import Api
from tests.server.console.browser import InBrowser
from tests.server.console.conftest import serve_console
from tests.server.test_oidc import _person, _write_config, issuer  # noqa: F401 - a fixture


@pytest.fixture(scope="module")
def shared_console(tmp_path_factory: pytest.TempPathFactory, api_record: Path,
                   issuer: str) -> Iterator[tuple[Api, Path]]:  # noqa: F811 - the fixture
    """The module's server, which reads the provider's settings when it starts: the config
    file of tests/server/test_oidc.py, in the server's directory."""
    tmp = tmp_path_factory.mktemp("console")
    _write_config(tmp, issuer)
    with serve_console(tmp, api_record) as served:
        yield served


def test_a_person_signs_in_by_single_sign_on_and_lands_on_the_page_asked_for(
        issuer: str, browser_page: InBrowser) -> None:  # noqa: F811 - the fixture
    page = browser_page.page
    _person(issuer, "u-2001", preferred_username="alice", groups=["fleet-operators"])
    # Given a browser without a session that asks for the fleet page
    browser_page.go("/ui/?from=sso")
    # Then the sign-in page offers single sign-on beside the token
    sso = page.get_by_role("link", name="Sign in with single sign-on")
    expect(sso).to_be_visible()
    expect(page.get_by_label("API token")).to_be_visible()
    # When she follows it, the provider's own login form is shown; she signs in there
    sso.click()
    page.wait_for_url(lambda url: url.startswith(issuer))
    page.get_by_placeholder("sub").fill("u-2001")
    page.get_by_role("button", name="Authorize").click()
    # Then the callback brings her back to the page she asked for, signed in as an operator
    expect(page).to_have_url(f"{browser_page.root}/ui/?from=sso")
    expect(page.get_by_text("alice · operator")).to_be_visible()
    expect(page.get_by_role("heading", name="Fleet now", level=1)).to_be_visible()
    expect(page.locator("[data-live-status]")).to_have_text("live")
    # And her session works for the pages' forms: signing out ends it
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{browser_page.root}/ui/login")
    assert browser_page.errors == []


def test_a_person_without_a_role_is_refused_on_a_console_page_with_one_line(
        issuer: str, browser_page: InBrowser) -> None:  # noqa: F811 - the fixture
    page = browser_page.page
    _person(issuer, "u-2002", email="carol@example.com", groups=["marketing"])
    browser_page.go("/ui/login")
    page.get_by_role("link", name="Sign in with single sign-on").click()
    page.wait_for_url(lambda url: url.startswith(issuer))
    page.get_by_placeholder("sub").fill("u-2002")
    with page.expect_navigation(url=lambda url: "/api/v1/auth/callback" in url) as answer:
        page.get_by_role("button", name="Authorize").click()
    # Then the callback answers a console page, not the API's JSON: 403 with the one line
    assert answer.value is not None and answer.value.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("Not allowed")
    expect(page.get_by_role("alert")).to_have_text(
        "carol@example.com has no fleetsched role: no value of the 'groups' claim is in "
        "oidc_roles")
    # And no session was opened: the console still asks to sign in
    browser_page.go("/ui/")
    assert "/ui/login" in page.url
    assert browser_page.errors == []
