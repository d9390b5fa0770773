"""The web console's calendar (``scheduler.server.console.calendar``) on a real server: the
team sees every window's and freeze's openings over the coming weeks, each marked with its
state in a class and in words (the SVG timeline and the table of the same openings), and the
schedules with their next occurrences; a customer sees only its own windows and no schedule.
Both read one calendar on the module's server (tests/server/console/conftest.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from tests.schedule_support import fired
from tests.server.conftest import Api
from tests.server.console.conftest import Console
from tests.tenants_support import customers_ini


@pytest.fixture(scope="module")
def calendar(shared_console: tuple[Api, Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the module's server, the team's windows on group web (one needing no approval, one
    approved, one denied), a freeze in ten days, a window of acme and one of globex awaiting
    them, a schedule."""
    cli, tmp_path = shared_console[0].cli, tmp_path_factory.mktemp("calendar")
    source = tmp_path / "customers.ini"
    source.write_text(customers_ini(acme=("acme-01",), globex=("globex-01",)))
    cli.ok("hosts", "import", str(source))
    for name, cron, assign, approval in (
            ("web-nightly", "0 2 * * *", "web", []),
            ("web-approved", "0 4 * * 1", "web", ["--requires-approval"]),
            ("web-denied", "0 5 * * 2", "web", ["--requires-approval"]),
            ("acme-sat", "0 22 * * 6", "acme", ["--requires-approval"]),
            ("globex-sun", "0 22 * * 0", "globex", ["--requires-approval"])):
        cli.ok("windows", "add", name, "--cron", cron, "--duration", "1h", *approval,
               operator="alice")
        cli.ok("windows", "assign", name, "--group", assign, operator="alice")
    cli.ok("windows", "approve", "web-approved", operator="bob")
    cli.ok("windows", "deny", "web-denied", "--comment", "not this month", operator="bob")
    start = (datetime.now(UTC) + timedelta(days=10)).strftime("%Y-%m-%dT00:00")
    end = (datetime.now(UTC) + timedelta(days=12)).strftime("%Y-%m-%dT00:00")
    cli.ok("windows", "freeze", "web-freeze", "--start", start, "--end", end, "--group", "web",
           operator="alice")
    cli.ok("schedules", "add", "nightly", "command", "--cron", "0 3 * * *", "-t", "group:web",
           "-p", "cmd=true")
    cli.ok("schedules", "add", "often", "command", "--every", "2s", "-t", "web-01",
           "-p", "cmd=true")


def _fire(console: Console, name: str) -> int:
    """Claim and fire schedule ``name``'s entry once it is due; its task's id."""
    client = redis.Redis.from_url(console.redis_url, decode_responses=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            made = [t for r in fired(client, console.api.database_url) if r.name == name
                    for t in r.tasks]
            if made:
                return made[0]
            time.sleep(0.5)
    finally:
        client.close()
    raise AssertionError(f"schedule {name} never fired")


def _listed(html: str, window: str) -> int:
    """The openings of ``window`` in the page's table (one row each)."""
    return html.count(f'<td><a href="/ui/windows/{window}">{window}</a></td>\n      <td><time')


def test_the_team_sees_every_opening_of_the_coming_weeks_with_its_state(
        console: Console, calendar: None) -> None:
    team = console.as_role("viewer")
    page = team.get("/ui/calendar")
    assert page.status_code == 200, page.text[:500]
    html = page.text
    # Four weeks by default: a nightly window opens 28 times, a weekly one 4 times
    assert _listed(html, "web-nightly") == 28
    assert _listed(html, "web-approved") == 4 and _listed(html, "web-denied") == 4
    # Each opening is drawn with its state as a class and in words
    for state, words in (("open", "no approval needed"), ("approved", "approved"),
                         ("denied", "denied"), ("pending", "pending approval"),
                         ("freeze", "freeze: nothing starts")):
        assert f'<rect class="opening {state}" x=' in html, state
        assert f'<span class="tag opening-{state}">{words}</span>' in html, state
    assert html.count('<rect class="opening open" x=') == 28 + 1  # and the legend's
    assert "web-nightly: " in html and "UTC, no approval needed</title>" in html
    # Both customers' windows, each in its group's row; the freeze in web's
    assert "group:acme" in html and "group:globex" in html and "web-freeze" in html
    # No inline style anywhere (the content security policy forbids it)
    assert "style=" not in html
    # And the schedules, with their next three occurrences and no task yet
    assert "<h2 id=\"sch-h\">Schedules</h2>" in html and ">nightly" in html
    assert "none yet" in html  # nightly has made no task
    # When a schedule fires (as a worker fires it), its task is listed with its state
    task = _fire(console, "often")
    html = team.get("/ui/calendar").text
    assert f'<a href="/ui/tasks/{task}">task {task}</a> <span class="state-' in html
    # One week: 7 nightly openings; one group: its row only
    assert _listed(team.get("/ui/calendar?weeks=1").text, "web-nightly") == 7
    acme_only = team.get("/ui/calendar?group=acme").text
    assert _listed(acme_only, "acme-sat") == 4 and "web-nightly" not in acme_only
    # A period out of range: refused with one line
    refused = team.get("/ui/calendar?weeks=9")
    assert refused.status_code == 422 and "Traceback" not in refused.text


def test_a_customer_sees_its_own_windows_only_and_no_schedule(
        console: Console, calendar: None) -> None:
    acme = console.as_role("customer-approver", tenant="acme", owner="ann")
    page = acme.get("/ui/calendar")
    assert page.status_code == 200, page.text[:500]
    html = page.text
    assert _listed(html, "acme-sat") == 4
    assert '<span class="tag opening-pending">pending approval</span>' in html
    assert "web-nightly" not in html and "web-freeze" not in html
    assert "globex" not in html.lower()
    assert "Schedules" not in html and "nightly" not in html
