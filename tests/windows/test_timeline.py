"""Each opening's approval state and the jobs waiting on a window (``scheduler.windows.timeline``
and ``.waiting``, through ``verbs.windows.openings``, ``timeline`` and ``waiting``) on real
SQLite and PostgreSQL: the state is what the approvals let the calendar core do (one opening
approved or denied, a series denied by one party of two), a customer reads only its own
party's decisions and another party's denial as pending; the jobs waiting on a window are
those whose window field names it (no LIKE wildcard matching another name), unfinished, a
customer's own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler.config import load_settings
from scheduler.errors import NotFoundError
from scheduler.principal import Principal
from scheduler.record.migrate import upgrade
from scheduler.verbs import inventory, windows
from scheduler.verbs.stores import Stores
from scheduler.windows.store import WindowSpec
from tests.submit_support import Cli
from tests.tenants_support import customers_ini

ALICE = Principal("alice", role="window-admin")
BOB = Principal("bob", role="window-admin")
ANN = Principal("ann", via="token:7", role="customer-approver", tenant="acme")
GUS = Principal("gus", via="token:9", role="customer-approver", tenant="globex")
WEEKLY = {"rrule": "FREQ=WEEKLY;BYDAY=SA;BYHOUR=22", "duration": "4h", "tz": "Europe/Berlin"}
INVENTORY = customers_ini(acme=("acme-01", "acme-02"), globex=("globex-01",)) + \
    "[team]\nops-01\n[shared:children]\nacme\nglobex\n"


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str, database_url: str) -> Stores:
    upgrade(database_url)
    (tmp_path / "config.toml").write_text("")
    stores = Stores(load_settings({"redis_url": redis_url, "database_url": database_url,
                                   "state_dir": tmp_path / "state"},
                                  environ={}, config_path=tmp_path / "config.toml"))
    source = tmp_path / "hosts.ini"
    source.write_text(INVENTORY)
    inventory.import_hosts(stores, Principal("importer"), source)
    return stores


def _window(fleet: Stores, name: str, group: str, **extra: object) -> None:
    windows.add(fleet, ALICE, WindowSpec(name=name, **{**WEEKLY, **extra}))  # type: ignore[arg-type]
    windows.assign(fleet, ALICE, name, groups=[group])


def _states(openings: list[dict[str, object]]) -> list[object]:
    return [o["state"] for o in openings]


def test_an_opening_is_approved_or_denied_one_by_one_as_the_approvals_say(
        fleet: Stores) -> None:
    _window(fleet, "team-sat", "team", requires_approval=True)
    _window(fleet, "free-sat", "team")
    first, second, third = windows.openings(fleet, "team-sat", 3)
    assert _states([first, second, third]) == ["pending"] * 3
    assert _states(windows.openings(fleet, "free-sat", 2)) == ["open", "open"]
    # When bob approves the second opening only, and denies the third
    windows.approve(fleet, BOB, "team-sat", occurrence=second["start_utc"].isoformat())
    windows.deny(fleet, BOB, "team-sat", comment="audit week",
                 occurrence=third["start_utc"].isoformat())
    first, second, third = windows.openings(fleet, "team-sat", 3)
    assert _states([first, second, third]) == ["pending", "approved", "denied"]
    assert [(d["by"], d["occurrence"]) for d in second["said"]] == [("bob", True)]
    assert [(d["decision"], d["comment"]) for d in third["said"]] == [("denied", "audit week")]
    # And the timeline over three weeks draws the same states at the same openings
    start = first["start_utc"] - timedelta(hours=1)
    (lane,) = windows.timeline(fleet, start, start + timedelta(weeks=3), group="team")
    drawn = {w["name"]: _states(w["openings"]) for w in lane["windows"]}
    assert lane["target"] == "group:team"
    assert drawn == {"free-sat": ["open"] * 3, "team-sat": ["pending", "approved", "denied"]}


def test_a_customer_reads_its_own_decisions_and_another_s_denial_as_pending(
        fleet: Stores) -> None:
    _window(fleet, "shared-sat", "shared", requires_approval=True)
    windows.approve(fleet, ANN, "shared-sat", comment="ok for acme")
    windows.deny(fleet, GUS, "shared-sat", comment="globex says no")
    # The team sees every opening denied, and both decisions
    team = windows.openings(fleet, "shared-sat", 2)
    assert _states(team) == ["denied", "denied"]
    assert sorted(d["comment"] for d in team[0]["said"]) == ["globex says no", "ok for acme"]
    # Acme sees them pending (awaiting others), with its own decision only
    acme = windows.openings(fleet, "shared-sat", 2, tenant="acme")
    assert _states(acme) == ["pending", "pending"]
    assert [(d["by"], d["comment"]) for d in acme[0]["said"]] == [("ann", "ok for acme")]
    start = datetime.now(UTC)
    lanes = windows.timeline(fleet, start, start + timedelta(weeks=2), tenant="acme")
    assert "globex" not in repr(lanes)
    # When globex approves too, every party did: approved for both views
    windows.approve(fleet, GUS, "shared-sat", comment="fine")
    assert _states(windows.openings(fleet, "shared-sat", 2)) == ["approved", "approved"]
    assert _states(windows.openings(fleet, "shared-sat", 2, tenant="globex")) == \
        ["approved", "approved"]


def test_the_jobs_waiting_on_a_window_are_its_own_unfinished_ones(
        fleet: Stores, tmp_path: Path, redis_url: str, database_url: str) -> None:
    # Given two windows whose names a LIKE wildcard would confuse, one on acme's, one on
    # globex's host, and a task in windows on both
    windows.add(fleet, ALICE, WindowSpec(name="night_1", cron="0 2 * * *", duration="2h"))
    windows.assign(fleet, ALICE, "night_1", hosts=["acme-01"])
    windows.add(fleet, ALICE, WindowSpec(name="nightx1", cron="0 2 * * *", duration="2h"))
    windows.assign(fleet, ALICE, "nightx1", hosts=["globex-01"])
    cli = Cli(tmp_path, redis_url, database_url)
    task = cli.submit("command", "--target", "acme-01,globex-01", "--param", "cmd=true",
                      "--in-window")
    # Then each window has its own host's job waiting, and a customer only its own window's
    assert [(j["host"], j["task"]) for j in windows.waiting(fleet, "night_1")] == \
        [("acme-01", task)]
    assert [j["host"] for j in windows.waiting(fleet, "nightx1")] == ["globex-01"]
    assert [j["host"] for j in windows.waiting(fleet, "night_1", tenant="acme")] == ["acme-01"]
    with pytest.raises(NotFoundError):
        windows.waiting(fleet, "nightx1", tenant="acme")
    # And a freeze holding a job: the job waits on it too (its field names it as !name)
    now = datetime.now(UTC)
    windows.freeze(fleet, ALICE, "hold", start=(now - timedelta(hours=1)).isoformat(),
                   end=(now + timedelta(days=1)).isoformat(), hosts=["ops-01"])
    held = cli.submit("command", "--target", "ops-01", "--param", "cmd=true")
    assert [(j["host"], j["task"]) for j in windows.waiting(fleet, "hold")] == \
        [("ops-01", held)]
    # When the task is cancelled, nothing waits any more
    cli.ok("tasks", "cancel", str(task))
    assert windows.waiting(fleet, "night_1") == []
