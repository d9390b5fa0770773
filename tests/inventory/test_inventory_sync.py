"""Importing inventories into SQL on SQLite and PostgreSQL: add, update, prune, dry run, one
transaction, the import event; group membership through child groups."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from scheduler.errors import FleetschedError, NotFoundError, ValidationError
from scheduler.inventory import (
    add_host,
    group_member_map,
    group_members,
    hosts_in_groups,
    import_inventory,
    list_groups,
    list_hosts,
    remove_host,
    show_host,
)
from scheduler.record.session import transaction

DATA = Path(__file__).parent / "data" / "inventories"
TABLES = ("hosts", "groups", "group_hosts", "group_children", "events")


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in TABLES}


def snapshot(engine: Engine) -> dict[str, list]:
    """Every row of the inventory tables, for before/after comparisons."""
    out = {}
    with engine.connect() as conn:
        for t in TABLES:
            rows = conn.execute(sa.text(f"SELECT * FROM {t}")).mappings().all()
            out[t] = sorted((tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows))
    return out


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_an_import_adds_hosts_groups_and_memberships_and_records_one_event(engine: Engine) -> None:
    # When the sample fleet is imported
    result = import_inventory(engine, DATA / "fleet.yml", operator="alice")
    # Then every host and group is stored, with the nesting of child groups
    assert result.plan.counts()["added"] == 9
    assert counts(engine) == {"hosts": 9, "groups": 5, "group_hosts": 8, "group_children": 4,
                              "events": 1}
    with transaction(engine) as s:
        assert group_members(s, "prod") == {
            "db-a.example.com", "db-b.example.com", "db-c.example.com",
            "web01.example.com", "web02.example.com", "web03.example.com", "web04.example.com"}
        assert group_members(s, "frontend") == {
            "lb1.example.com", "web01.example.com", "web02.example.com", "web03.example.com",
            "web04.example.com"}
        assert group_members(s, "ungrouped") == {"bastion.example.com"}
        assert len(group_members(s, "all")) == 9
        assert hosts_in_groups(s, ["lb", "db"]) == {
            "lb1.example.com", "db-a.example.com", "db-b.example.com", "db-c.example.com"}
        web04 = show_host(s, "web04.example.com")
    assert web04["port"] == 2222 and web04["user"] == "deploy"
    assert web04["vars"]["tier"] == "canary" and web04["all_groups"] == ["frontend", "prod", "web"]
    # And one import event names the operator, the source and the counts
    with engine.connect() as conn:
        ev = conn.execute(sa.text("SELECT kind, operator, data FROM events")).one()
    data = ev.data if isinstance(ev.data, dict) else __import__("json").loads(ev.data)
    assert (ev.kind, ev.operator) == ("import", "alice")
    assert data["source"] == str(DATA / "fleet.yml") and data["added"] == 9
    assert data["groups_added"] == 5


def test_importing_an_equivalent_file_of_another_format_changes_only_the_source(
        engine: Engine, tmp_path: Path) -> None:
    # Given the fleet imported from INI
    ini = shutil.copy(DATA / "fleet.ini", tmp_path / "fleet")
    import_inventory(engine, ini, operator="a")
    before = {r["name"]: r for r in _hosts(engine)}
    # When the same path now holds the JSON form of the same fleet
    shutil.copy(DATA / "fleet.json", tmp_path / "fleet")
    result = import_inventory(engine, ini, operator="a", fmt="json")
    # Then nothing changes
    assert result.plan.counts()["unchanged"] == 9
    assert not result.plan.changes_anything
    assert {r["name"]: r for r in _hosts(engine)} == before


def _hosts(engine: Engine) -> list[dict]:
    with transaction(engine) as s:
        return [{k: v for k, v in r.items() if k not in ("created_at", "updated_at")}
                for r in list_hosts(s)]


def test_changed_hosts_are_updated_and_the_plan_names_the_changed_fields(
        engine: Engine, tmp_path: Path) -> None:
    inv = write(tmp_path / "inv.ini", "[web]\nw1 ansible_host=10.0.0.1\nw2\n[db]\nd1\n"
                                      "[web:vars]\nrole=web\n")
    import_inventory(engine, inv, operator="a")
    # When w1 moves address and port, w2 moves group, and web's vars change
    write(inv, "[web]\nw1 ansible_host=10.0.0.9 ansible_port=2200\n[db]\nd1\nw2\n"
               "[web:vars]\nrole=frontend\n")
    plan = import_inventory(engine, inv, operator="a").plan
    # Then the plan lists exactly those changes
    changes = {c.name: c.changes for c in plan.updated}
    assert changes["w1"]["address"] == ("10.0.0.1", "10.0.0.9")
    assert changes["w1"]["port"] == (22, 2200)
    assert changes["w1"]["vars"] == ({"role": "web"}, {"role": "frontend"})
    assert changes["w2"]["groups"] == (["web"], ["db"])
    assert "vars" in changes["w2"]
    assert plan.unchanged == 1 and plan.groups_updated == ["web"]
    # And the database holds the new state
    with transaction(engine) as s:
        assert group_members(s, "db") == {"d1", "w2"}
        assert show_host(s, "w1")["address"] == "10.0.0.9"


def test_prune_removes_only_what_this_source_imported_and_no_longer_has(
        engine: Engine, tmp_path: Path) -> None:
    # Given hosts from two inventory files and one added by hand
    a = write(tmp_path / "a.ini", "[web]\nw1\nw2\n[old]\nw2\n")
    b = write(tmp_path / "b.ini", "[db]\nd1\n")
    import_inventory(engine, a, operator="x")
    import_inventory(engine, b, operator="x")
    with transaction(engine) as s:
        add_host(s, "manual1", groups=["web"], operator="x")
    # When a.ini drops w2 and group old, and is imported without --prune
    write(a, "[web]\nw1\n")
    plan = import_inventory(engine, a, operator="x").plan
    # Then w2 is kept and reported as having left the source
    assert plan.left == ["w2"] and plan.removed == []
    assert counts(engine)["hosts"] == 4
    # When it is imported with --prune
    plan = import_inventory(engine, a, operator="x", prune=True).plan
    # Then w2 and group old are removed; b.ini's d1 and the hand-added host stay
    assert plan.removed == ["w2"] and plan.groups_removed == ["old"]
    with transaction(engine) as s:
        assert {r["name"] for r in list_hosts(s)} == {"w1", "d1", "manual1"}
        assert group_members(s, "web") == {"w1", "manual1"}
        assert "old" not in group_member_map(s)


def test_a_dry_run_reports_the_same_plan_as_the_import_and_writes_nothing(
        engine: Engine, tmp_path: Path) -> None:
    inv = write(tmp_path / "inv.ini", "[web]\nw[1:5]\n[web:vars]\nx=1\n")
    import_inventory(engine, inv, operator="a")
    write(inv, "[web]\nw[2:6]\n[web:vars]\nx=2\n[db]\nd1\n")
    before = snapshot(engine)
    # When the change is dry-run
    dry = import_inventory(engine, inv, operator="a", prune=True, dry_run=True).plan
    # Then no row changed, not even an event
    assert snapshot(engine) == before
    assert [h.name for h in dry.added] == ["w6", "d1"]
    assert dry.removed == ["w1"] and len(dry.updated) == 4
    # And the real import does what the dry run said
    real = import_inventory(engine, inv, operator="a", prune=True).plan
    assert real.counts() == dry.counts()
    assert [c.changes for c in real.updated] == [c.changes for c in dry.updated]


def test_a_failure_midway_through_an_import_leaves_nothing_half_written(
        engine: Engine, tmp_path: Path) -> None:
    # Given an imported fleet, and a change that adds, updates and prunes hosts
    import_inventory(engine, DATA / "fleet.ini", operator="a")
    inv = write(tmp_path / "inv.ini", "[web]\nn[1:10]\n")
    import_inventory(engine, inv, operator="a")
    write(inv, "[web]\nn[5:20]\n[web:vars]\nx=1\n")
    before = snapshot(engine)

    # and a database that fails the import's last statement (the event)
    def fail_on_event_insert(conn, cursor, statement, params, context, executemany):  # noqa: ANN001
        if statement.lstrip().upper().startswith("INSERT INTO EVENTS"):
            raise sa.exc.IntegrityError(statement, params, Exception("injected failure"))

    event.listen(engine, "before_cursor_execute", fail_on_event_insert)
    try:
        # When the import runs with --prune (hosts inserted, updated and deleted before it fails)
        with pytest.raises(FleetschedError, match="refused"):
            import_inventory(engine, inv, operator="a", prune=True)
    finally:
        event.remove(engine, "before_cursor_execute", fail_on_event_insert)
    # Then every table is exactly as before
    assert snapshot(engine) == before


def test_hosts_added_and_removed_by_hand_are_validated_and_recorded(engine: Engine) -> None:
    with transaction(engine) as s:
        created = add_host(s, "h1", address="10.1.1.1", port=2222, user="ops",
                           groups=["edge", "web"], host_vars={"rack": 4}, operator="bob")
    assert created == ["edge", "web"]
    with transaction(engine) as s:
        row = show_host(s, "h1")
        assert (row["address"], row["port"], row["user"], row["groups"], row["source"]) == (
            "10.1.1.1", 2222, "ops", ["edge", "web"], "cli")
        with pytest.raises(ValidationError, match="already exists"):
            add_host(s, "h1", operator="bob")
    for bad in ({"address": "a b"}, {"user": "-root"}, {"port": 0},
                {"host_vars": {"db_password": "x"}}):
        with pytest.raises(ValidationError), transaction(engine) as s:
            add_host(s, "h2", operator="bob", **bad)
    with transaction(engine) as s:
        remove_host(s, "h1", operator="bob")
        with pytest.raises(NotFoundError):
            remove_host(s, "h1", operator="bob")
    with engine.connect() as conn:
        kinds = conn.execute(sa.text("SELECT kind, host, operator FROM events ORDER BY ts")).all()
    assert [tuple(k) for k in kinds] == [("host-add", "h1", "bob"), ("host-remove", "h1", "bob")]
    assert counts(engine)["hosts"] == 0


def test_listing_filters_by_group_with_children_and_by_name_pattern(engine: Engine) -> None:
    import_inventory(engine, DATA / "fleet.json", operator="a")
    with transaction(engine) as s:
        names = [r["name"] for r in list_hosts(s, group="prod", match="*-[ab].*")]
        assert names == ["db-a.example.com", "db-b.example.com"]
        assert [r["name"] for r in list_hosts(s, match="web0[34]*")] == [
            "web03.example.com", "web04.example.com"]
        with pytest.raises(NotFoundError):
            list_hosts(s, group="nope")
        groups = {g["name"]: g for g in list_groups(s)}
    assert (groups["prod"]["hosts"], groups["prod"]["all_hosts"]) == (0, 7)
    assert groups["web"]["parents"] == ["frontend", "prod"]
    assert groups["prod"]["children"] == ["db", "web"]


def test_the_member_map_of_a_few_hosts_is_the_whole_maps_restricted_to_them(
        engine: Engine, tmp_path: Path) -> None:
    # Given an inventory with nested groups (fleet.ini: children, hosts in several groups)
    import_inventory(engine, shutil.copy(DATA / "fleet.ini", tmp_path / "fleet"), operator="a")
    from scheduler.inventory import group_member_map, group_member_map_of

    with transaction(engine, commit=False) as session:
        whole = group_member_map(session)
        every = sorted(whole["all"])
        # Then for any few hosts (and a name that is no host), the restricted map is the whole
        # map cut down to them, in every group, "all" and "ungrouped" included
        for picked in ([every[0]], every[:3], every[-2:] + ["no-such-host"], every):
            part = group_member_map_of(session, picked)
            for group, hosts in whole.items():
                assert part.get(group, set()) == hosts & set(picked), (group, picked)
            assert set(part) - set(whole) == set()
