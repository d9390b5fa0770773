"""Customers approve the windows of their own hosts (issue 28 section 4), through the verbs the
CLI and the API call, on real SQLite and a real redis-server: who must approve (each owner of
the hosts a window covers), decisions bound to the window's version (an edit sends it back to
pending), the proposer refused, expiry, revocation, one occurrence or the series, a denial, a
foreign customer answered as if the window did not exist, and the claim path reading what the
Redis copy says."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from scheduler.calendar.windows import next_opening, upcoming
from scheduler.config import load_settings
from scheduler.errors import ForbiddenError, NotFoundError, ValidationError
from scheduler.principal import Principal
from scheduler.record.migrate import upgrade
from scheduler.verbs import inventory, windows
from scheduler.verbs.stores import Stores
from scheduler.windows.store import WindowSpec
from scheduler.windows.wire import window_from_hash
from tests.submit_support import KEYS, sql_rows

ALICE = Principal("alice", role="window-admin")  # the team's window admin: proposes
BOB = Principal("bob", role="window-admin")  # the team's other admin
ACME = Principal("ann", via="token:7", role="customer-approver", tenant="acme")
ACME_2 = Principal("arno", via="token:8", role="customer-approver", tenant="acme")
GLOBEX = Principal("gus", via="token:9", role="customer-approver", tenant="globex")
INITECH = Principal("ida", via="token:10", role="customer-approver", tenant="initech")
INVENTORY = """[acme]
acme-[01:02]
[acme:vars]
fleetsched_tenant=acme
[globex]
globex-01
[globex:vars]
fleetsched_tenant=globex
[team]
ops-01
[shared:children]
acme
globex
"""
WEEKLY = dict(rrule="FREQ=WEEKLY;BYDAY=SA;BYHOUR=22", duration="4h", tz="Europe/Berlin")


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Stores:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    (tmp_path / "config.toml").write_text("")
    stores = Stores(load_settings({"redis_url": redis_url, "database_url": db,
                                   "state_dir": tmp_path / "state"},
                                  environ={}, config_path=tmp_path / "config.toml"))
    source = tmp_path / "hosts.ini"
    source.write_text(INVENTORY)
    inventory.import_hosts(stores, Principal("importer"), source)
    return stores


def _copy(client: redis.Redis, name: str) -> dict[str, str]:
    return client.hgetall(KEYS.window(name))


def _window(fleet: Stores, name: str, group: str, **extra: object) -> None:
    windows.add(fleet, ALICE, WindowSpec(name=name, requires_approval=True,
                                         **{**WEEKLY, **extra}))  # type: ignore[arg-type]
    windows.assign(fleet, ALICE, name, groups=[group])


def test_a_window_over_two_customers_runs_only_once_each_approved_and_the_team_cannot_for_them(
        fleet: Stores, redis_client: redis.Redis) -> None:
    # Given a window that needs approval, over the hosts of acme and globex
    _window(fleet, "shared-sat", "shared")
    shown = windows.show(fleet, "shared-sat")
    assert shown["parties"] == ["customer acme", "customer globex"]
    assert shown["pending"] == ["customer acme", "customer globex"]
    assert _copy(redis_client, "shared-sat")["approved"] == "0"
    # When the team tries to approve it on the customers' behalf: refused, saying who is awaited
    with pytest.raises(ValidationError, match="needs no approval from the team") as refused:
        windows.approve(fleet, BOB, "shared-sat")
    assert refused.value.hint == "awaited: customer acme, customer globex"
    # When acme approves: still not in use, globex is awaited
    done = windows.approve(fleet, ACME, "shared-sat", comment="fine for us")
    assert (done.party, done.version, done.approval) == ("acme", 1, "PENDING customer globex")
    assert _copy(redis_client, "shared-sat")["approved"] == "0"
    # When globex approves too: in use
    assert windows.approve(fleet, GLOBEX, "shared-sat").approval == "approved"
    assert _copy(redis_client, "shared-sat")["approved"] == "1"
    # And each decision is an event naming the principal, how it was authenticated, the version
    url = fleet.settings.database_url
    rows = sql_rows(url, "SELECT operator, data FROM events WHERE kind = 'window-approve' "
                         "ORDER BY id")
    assert [r.operator for r in rows] == ["ann", "gus"]
    assert '"token:7"' in rows[0].data and '"version": 1' in rows[0].data
    assert '"fine for us"' in rows[0].data


def test_an_edit_makes_a_new_version_that_every_party_approves_again(
        fleet: Stores, redis_client: redis.Redis) -> None:
    _window(fleet, "acme-sat", "acme")
    windows.approve(fleet, ACME, "acme-sat")
    assert _copy(redis_client, "acme-sat")["approved"] == "1"
    # When the team edits the definition (a longer opening)
    edited = windows.edit(fleet, BOB, "acme-sat", duration="6h")
    # Then it is version 2, pending again, and the workers' copy says so at once
    assert edited.count == 2
    shown = windows.show(fleet, "acme-sat")
    assert (shown["version"], shown["pending"], shown["changed_by"]) == (2, ["customer acme"],
                                                                        "bob")
    assert shown["duration_s"] == 6 * 3600
    assert _copy(redis_client, "acme-sat")["approved"] == "0"
    assert [d["current"] for d in shown["decisions"]] == [False]
    # And the customer's approval of version 2 puts it back in use
    assert windows.approve(fleet, ACME_2, "acme-sat").version == 2
    assert _copy(redis_client, "acme-sat")["approved"] == "1"


def test_the_proposer_of_a_version_may_not_approve_it(fleet: Stores) -> None:
    # Given a window over team hosts, added by alice
    _window(fleet, "ops-sat", "team")
    assert windows.show(fleet, "ops-sat")["parties"] == ["the team"]
    with pytest.raises(ForbiddenError, match="alice proposed version 1 of window 'ops-sat'"):
        windows.approve(fleet, ALICE, "ops-sat")
    assert windows.approve(fleet, BOB, "ops-sat").approval.startswith("by bob")
    # After bob edits it, bob proposed version 2: alice may approve it, bob may not
    windows.edit(fleet, BOB, "ops-sat", description="moved")
    with pytest.raises(ForbiddenError, match="bob proposed version 2"):
        windows.approve(fleet, BOB, "ops-sat")
    windows.approve(fleet, ALICE, "ops-sat")


def test_a_foreign_customer_cannot_tell_the_window_exists(fleet: Stores) -> None:
    _window(fleet, "acme-sat", "acme")
    for verb in (lambda: windows.approve(fleet, INITECH, "acme-sat"),
                 lambda: windows.deny(fleet, GLOBEX, "acme-sat", comment="no"),
                 lambda: windows.revoke(fleet, GLOBEX, "acme-sat")):
        with pytest.raises(NotFoundError, match="no window named 'acme-sat'"):
            verb()
    with pytest.raises(NotFoundError, match="no window named 'nope'"):
        windows.approve(fleet, ACME, "nope")


def test_a_denial_needs_a_reason_and_holds_until_a_later_approval(
        fleet: Stores, redis_client: redis.Redis) -> None:
    _window(fleet, "acme-sat", "acme")
    with pytest.raises(ValidationError, match="a denial needs a comment"):
        windows.deny(fleet, ACME, "acme-sat", comment=" ")
    windows.approve(fleet, ACME, "acme-sat")
    denied = windows.deny(fleet, ACME_2, "acme-sat", comment="quarter close")
    assert denied.approval == "DENIED by customer acme"
    assert _copy(redis_client, "acme-sat")["approved"] == "0"
    assert windows.approve(fleet, ACME, "acme-sat").approval == "approved"


def test_a_revoked_approval_stops_new_starts_at_the_claim(
        fleet: Stores, redis_client: redis.Redis) -> None:
    _window(fleet, "acme-sat", "acme")
    windows.approve(fleet, ACME, "acme-sat")
    revoked = windows.revoke(fleet, ACME_2, "acme-sat")
    assert (revoked.decision, revoked.approval) == ("revoked", "PENDING customer acme")
    # The claim path reads the Redis copy: no approved opening any more
    copy = window_from_hash("acme-sat", _copy(redis_client, "acme-sat"))
    assert next_opening([copy], datetime.now(timezone.utc)) is None
    with pytest.raises(NotFoundError, match="customer acme has no standing approval"):
        windows.revoke(fleet, ACME, "acme-sat")


def test_an_expiring_approval_covers_the_openings_before_its_expiry_only(
        fleet: Stores, redis_client: redis.Redis) -> None:
    _window(fleet, "acme-sat", "acme")
    done = windows.approve(fleet, ACME, "acme-sat", expires="20d")
    assert done.approval.startswith("approved until ")
    copy = window_from_hash("acme-sat", _copy(redis_client, "acme-sat"))
    now = datetime.now(timezone.utc)
    until = copy.approved_until
    assert until is not None and abs(until - (now + timedelta(days=20))) < timedelta(minutes=1)
    # Every opening found starts before the expiry, and none after it
    first = next_opening([copy], now)
    assert first is not None and first.start_utc < until
    assert next_opening([copy], until) is None
    with pytest.raises(ValidationError, match="is not in the future"):
        windows.approve(fleet, ACME_2, "acme-sat", expires="2020-01-01T00:00")


def test_one_approved_occurrence_is_the_only_opening_in_use(
        fleet: Stores, redis_client: redis.Redis) -> None:
    _window(fleet, "acme-sat", "acme")
    now = datetime.now(timezone.utc)
    model = window_from_hash("acme-sat", _copy(redis_client, "acme-sat"))
    second = upcoming(model, now + timedelta(days=8), 1)[0]  # not the next Saturday's
    # A time that is not an opening's start is refused
    with pytest.raises(ValidationError, match="has no opening starting at"):
        windows.approve(fleet, ACME, "acme-sat",
                        occurrence=(second.start_utc + timedelta(hours=1)).isoformat())
    done = windows.approve(fleet, ACME, "acme-sat", occurrence=second.start_utc.isoformat())
    assert done.approval == "1 occurrence(s) approved"
    copy = window_from_hash("acme-sat", _copy(redis_client, "acme-sat"))
    found = next_opening([copy], now)
    assert found is not None and found.start_utc == second.start_utc


def test_freezes_and_windows_over_nobody_asking_need_no_approval(
        fleet: Stores, redis_client: redis.Redis) -> None:
    windows.add(fleet, ALICE, WindowSpec(name="xmas", freeze=True, start="2030-12-24T00:00",
                                         end="2030-12-27T00:00"))
    windows.assign(fleet, ALICE, "xmas", groups=["acme"])
    with pytest.raises(ValidationError, match="is a freeze"):
        windows.approve(fleet, ACME, "xmas")
    windows.add(fleet, ALICE, WindowSpec(name="plain", **WEEKLY))  # type: ignore[arg-type]
    windows.assign(fleet, ALICE, "plain", groups=["acme"])
    assert windows.show(fleet, "plain")["approval"] == "not required"
    assert _copy(redis_client, "plain")["approved"] == "1"
    with pytest.raises(ValidationError, match="needs no approval from customer acme"):
        windows.approve(fleet, ACME, "plain")


def test_a_customer_declares_a_freeze_over_its_own_hosts_only(
        fleet: Stores, redis_client: redis.Redis) -> None:
    dates = dict(start="2030-12-20T00:00", end="2031-01-04T00:00", tz="Europe/Berlin")
    # A host or group of another customer is not found; a group shared with others is refused;
    # nothing is written by any of them
    with pytest.raises(NotFoundError, match="no host named 'globex-01'"):
        windows.freeze(fleet, ACME, "year-end", hosts=["acme-01", "globex-01"], **dates)
    with pytest.raises(NotFoundError, match="no group named 'globex'"):
        windows.freeze(fleet, ACME, "year-end", groups=["globex"], **dates)
    with pytest.raises(ValidationError, match="group 'shared' holds hosts of others too"):
        windows.freeze(fleet, ACME, "year-end", groups=["shared"], **dates)
    with pytest.raises(ValidationError, match="needs hosts or groups"):
        windows.freeze(fleet, ACME, "year-end", **dates)
    assert not sql_rows(fleet.settings.database_url, "SELECT name FROM windows")
    # Its own group: a freeze named after the customer, assigned, in Redis, shown to it
    done = windows.freeze(fleet, ACME, "year-end", groups=["acme"], **dates)
    assert (done.name, done.kind, done.by) == ("acme:year-end", "freeze", "ann")
    shown = windows.show(fleet, "acme:year-end", tenant="acme")
    assert shown["assigned"] == ["group:acme"] and shown["kind"] == "freeze"
    assert _copy(redis_client, "acme:year-end")["kind"] == "freeze"
    # The team declares one over any host, under the name it gives
    assert windows.freeze(fleet, BOB, "dc-move", hosts=["ops-01", "globex-01"],
                          **dates).name == "dc-move"


def test_a_host_moved_to_a_customer_makes_its_window_await_that_customer(
        fleet: Stores, redis_client: redis.Redis, tmp_path: Path) -> None:
    # Given the team's window over ops-01, approved by the team
    _window(fleet, "ops-sat", "team")
    windows.approve(fleet, BOB, "ops-sat")
    assert _copy(redis_client, "ops-sat")["approved"] == "1"
    # When the inventory makes ops-01 acme's
    source = tmp_path / "hosts.ini"
    source.write_text(INVENTORY.replace("[team]\nops-01\n", "[team]\nops-01\n[team:vars]\n"
                                                            "fleetsched_tenant=acme\n"))
    inventory.import_hosts(fleet, Principal("importer"), source)
    # Then the window awaits acme, and the workers' copy says so at once
    assert windows.show(fleet, "ops-sat")["pending"] == ["customer acme"]
    assert _copy(redis_client, "ops-sat")["approved"] == "0"


def test_the_newest_approval_stands_and_leaves_the_party_pending_once_it_expires(
        fleet: Stores) -> None:
    from scheduler.record.models import Window as WindowRow
    from scheduler.windows.approvals import effective

    _window(fleet, "acme-sat", "acme")
    windows.approve(fleet, ACME, "acme-sat")  # the series, for good
    windows.approve(fleet, ACME_2, "acme-sat", expires="10d")  # then: only for ten days
    later = datetime.now(timezone.utc) + timedelta(days=11)
    with fleet.reading() as session:
        row = session.query(WindowRow).filter_by(name="acme-sat").one()
        now_ok, after = effective(session, [row])[row.id], effective(session, [row], later)[row.id]
    assert now_ok.approved and now_ok.until is not None
    assert not after.approved and after.pending == ("acme",)


# ------------------------------------------------- found by an adversarial review, now held


def _second_saturday(redis_client: redis.Redis) -> datetime:
    model = window_from_hash("acme-sat", _copy(redis_client, "acme-sat"))
    return upcoming(model, datetime.now(timezone.utc) + timedelta(days=8), 1)[0].start_utc


def test_denying_one_occurrence_closes_it_under_a_series_approval_and_after_its_approval(
        fleet: Stores, redis_client: redis.Redis) -> None:
    from scheduler.calendar.windows import is_open

    _window(fleet, "acme-sat", "acme")
    second = _second_saturday(redis_client)
    windows.approve(fleet, ACME, "acme-sat")
    done = windows.deny(fleet, ACME_2, "acme-sat", comment="not that Saturday",
                        occurrence=second.isoformat())
    assert done.approval == "approved; 1 occurrence(s) denied"
    claim = window_from_hash("acme-sat", _copy(redis_client, "acme-sat"))
    assert not is_open([claim], second + timedelta(minutes=1))
    assert is_open([claim], second - timedelta(days=7) + timedelta(minutes=1))  # the one before
    # An occurrence approved, then denied: the newest decision stands
    windows.revoke(fleet, ACME, "acme-sat")
    windows.approve(fleet, ACME, "acme-sat", occurrence=second.isoformat())
    assert windows.deny(fleet, ACME_2, "acme-sat", comment="changed our mind",
                        occurrence=second.isoformat()).approval == "PENDING customer acme"


def test_an_occurrence_approval_takes_no_expiry(fleet: Stores, redis_client: redis.Redis) -> None:
    _window(fleet, "acme-sat", "acme")
    with pytest.raises(ValidationError, match="not both"):
        windows.approve(fleet, ACME, "acme-sat", expires="1d",
                        occurrence=_second_saturday(redis_client).isoformat())


def test_a_customer_gets_the_same_answer_for_a_foreign_window_as_for_a_missing_one(
        fleet: Stores) -> None:
    _window(fleet, "globex-sat", "globex")
    windows.add(fleet, ALICE, WindowSpec(name="globex-xmas", freeze=True,
                                         start="2030-12-24T00:00", end="2030-12-27T00:00"))
    windows.assign(fleet, ALICE, "globex-xmas", groups=["globex"])
    for name, extra in (("globex-sat", {}), ("globex-xmas", {}),
                        ("globex-sat", {"occurrence": "2030-01-01T00:00"}),
                        ("globex-sat", {"expires": "soon"})):
        with pytest.raises(NotFoundError, match=f"no window named '{name}'"):
            windows.approve(fleet, ACME, name, **extra)  # type: ignore[arg-type]


def test_a_decision_for_a_version_that_changed_since_is_refused(fleet: Stores) -> None:
    from scheduler.errors import ConflictError

    _window(fleet, "acme-sat", "acme")
    windows.edit(fleet, BOB, "acme-sat", duration="5h")
    with pytest.raises(ConflictError, match="at version 2, not 1"):
        windows.approve(fleet, ACME, "acme-sat", version=1)
    assert windows.approve(fleet, ACME, "acme-sat", version=2).version == 2


def _slow_connect(fleet: Stores, gate: threading.Event, reached: threading.Event) -> Any:
    """A connection to the real Redis that is slow to come (a GC pause, a busy network)."""
    def connect() -> Any:
        reached.set()
        gate.wait(30)
        return fleet.connect()
    return connect


@pytest.mark.parametrize("then", ["revoke", "edit", "sync"])
def test_a_copy_delayed_past_a_later_change_never_lands_over_it(
        fleet: Stores, redis_client: redis.Redis, then: str) -> None:
    from scheduler.windows.store import decide_window, sync_windows

    _window(fleet, "acme-sat", "acme")
    if then == "sync":
        windows.approve(fleet, ACME, "acme-sat")
    gate, reached = threading.Event(), threading.Event()

    def slow() -> None:  # an approval, or a sync, committed but slow to copy
        with fleet.database() as engine:
            connect = _slow_connect(fleet, gate, reached)
            if then == "sync":
                sync_windows(engine, connect, fleet.shards)
            else:
                decide_window(engine, connect, "acme-sat", ACME, "approved", keys=fleet.shards)

    worker = threading.Thread(target=slow)
    worker.start()
    assert reached.wait(30)
    # When a later change commits and copies first
    if then == "edit":
        windows.edit(fleet, BOB, "acme-sat", rrule="FREQ=WEEKLY;BYDAY=SU;BYHOUR=3")
    else:
        windows.revoke(fleet, ACME_2, "acme-sat")
    gate.set()
    worker.join()
    # Then the copy that lands last shows the record as it is now: pending, the new rule
    assert windows.show(fleet, "acme-sat")["pending"] == ["customer acme"]
    data = _copy(redis_client, "acme-sat")
    assert data["approved"] == "0"
    assert ("BYDAY=SU" in data["rrule"]) == (then == "edit")


def test_a_removed_group_makes_its_window_answer_to_the_team_at_once(
        fleet: Stores, redis_client: redis.Redis) -> None:
    _window(fleet, "acme-sat", "acme")
    windows.approve(fleet, ACME, "acme-sat")
    assert _copy(redis_client, "acme-sat")["approved"] == "1"
    inventory.remove_group(fleet, Principal("importer"), "acme")
    assert windows.show(fleet, "acme-sat")["pending"] == ["the team"]
    assert _copy(redis_client, "acme-sat")["approved"] == "0"


def test_a_customer_reads_its_own_decisions_and_nothing_of_another_customers(
        fleet: Stores) -> None:
    _window(fleet, "shared-sat", "shared")
    windows.deny(fleet, GLOBEX, "shared-sat", comment="globex merger freeze, confidential")
    shown = windows.show(fleet, "shared-sat", tenant="acme")
    listed = windows.list_(fleet, tenant="acme")
    seen = repr(shown) + repr(listed)
    assert "globex" not in seen and "gus" not in seen and "confidential" not in seen
    assert shown["pending"] == ["customer acme"] and shown["others_pending"]
    assert shown["approval"] == "PENDING your approval; awaiting others"
    # While the team sees every party
    assert windows.show(fleet, "shared-sat")["denied"] == ["customer globex"]


def test_the_cli_decides_only_on_the_version_it_names(tmp_path: Path, redis_url: str) -> None:
    from tests.submit_support import cli_with_inventory

    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\n")
    cli.ok("windows", "add", "w", "--cron", "0 22 * * SAT", "--duration", "2h",
           "--requires-approval", operator="alice")
    cli.ok("windows", "assign", "w", "--group", "web", operator="alice")
    cli.ok("windows", "edit", "w", "--duration", "3h", operator="alice")
    code, out, err = cli("windows", "approve", "w", "--if-version", "1", operator="bob")
    assert code == 2 and "window 'w' is at version 2, not 1" in err, out + err
    code, out, err = cli("windows", "approve", "w", "--if-version", "2", operator="bob")
    assert code == 0 and "approved for the team by bob (version 2)" in err, out + err
