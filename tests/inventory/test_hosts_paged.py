"""``hosts list`` (and ``GET /api/v1/hosts``) reads one page in SQL with its ``match`` and
``group`` filters, on SQLite and PostgreSQL, and a page means what ``fnmatchcase`` over every
host would: ``*`` and ``?`` as wildcards, ``_`` and ``%`` as themselves, case-sensitive. The
console's host search by variable (``host_vars``) is read in SQL too, alike on both."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from scheduler.errors import ValidationError
from scheduler.inventory import import_inventory, list_hosts
from scheduler.inventory.store import SQLITE_RAW_JSON
from scheduler.record.session import transaction

NAMES = [f"web-{n:02}" for n in range(1, 13)] + ["db-1", "DB-2", "a_b", "axb", "a.b"]


@pytest.fixture
def fleet(engine: Engine, tmp_path: Path) -> Engine:
    path = tmp_path / "fleet.ini"
    path.write_text("[web]\n" + "\n".join(n for n in NAMES if n.startswith("web-")) + "\n"
                    "[other]\n" + "\n".join(n for n in NAMES if not n.startswith("web-"))
                    + "\n")
    import_inventory(engine, path, operator="tester")
    return engine


def _page(engine: Engine, **filters: Any) -> tuple[list[str], list[str]]:
    """The names of one page, and the SQL statements that read it."""
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        with transaction(engine, commit=False) as session:
            names = [r["name"] for r in list_hosts(session, **filters)]
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    return names, statements


@pytest.mark.parametrize("pattern", ["web-*", "web-0?", "a_b", "a?b", "db-*", "DB-*", "*b",
                                     "a.b", "*"])
def test_a_page_of_matching_hosts_is_read_in_sql_as_fnmatchcase_would_cut_it(
        fleet: Engine, pattern: str) -> None:
    every = sorted(n for n in NAMES if fnmatch.fnmatchcase(n, pattern))
    for offset in (0, 2):
        names, statements = _page(fleet, match=pattern, limit=3, offset=offset)
        assert names == every[offset:offset + 3]
        hosts_read = [s for s in statements if "FROM hosts" in s and "JOIN" not in s]
        assert hosts_read and all("LIMIT" in s for s in hosts_read), statements


def test_a_page_of_a_group_is_read_in_sql(fleet: Engine) -> None:
    names, statements = _page(fleet, group="web", limit=4, offset=4)
    assert names == [f"web-{n:02}" for n in range(5, 9)]
    assert any("LIMIT" in s and "FROM hosts" in s for s in statements), statements
    names, _ = _page(fleet, group="web", match="web-1*", limit=2, offset=1)
    assert names == ["web-11", "web-12"]


def test_a_pattern_with_a_class_is_matched_in_python_with_the_same_pages(
        fleet: Engine) -> None:
    names, _ = _page(fleet, match="web-0[13579]", limit=2, offset=1)
    assert names == ["web-03", "web-05"]


def test_hosts_are_found_by_their_own_variables_as_text_in_one_sql_page(
        engine: Engine, tmp_path: Path) -> None:
    # Given hosts whose variables are text, numbers, booleans and a list
    path = tmp_path / "vars.ini"
    path.write_text("[db]\ndb-1 rack=r1 slots=4 ssd=True tags=\"['a']\"\n"
                    "db-2 rack=r2 slots=8 ssd=False\ndb-3 rack=r1 slots=4.5\n"
                    "[web]\nweb-1 rack=r1\n")
    import_inventory(engine, path, operator="tester")

    def found(**wanted: str) -> list[str]:
        names, statements = _page(engine, host_vars=wanted, limit=10)
        assert any("LIMIT" in s and "FROM hosts" in s for s in statements), statements
        return names

    # Then each value is compared as text, the same on SQLite and PostgreSQL
    assert found(rack="r1") == ["db-1", "db-3", "web-1"]
    assert found(rack="r1", slots="4") == ["db-1"]
    assert found(slots="4.5") == ["db-3"]
    assert found(ssd="true") == ["db-1"] and found(ssd="false") == ["db-2"]
    assert found(tags="['a']") == [] and found(tags='["a"]') == []  # a list never matches
    assert found(rack="R1") == [] and found(nope="r1") == []
    # With a name pattern (a class: matched in Python) and a group, paged
    names, _ = _page(engine, host_vars={"rack": "r1"}, match="[dw]*-1", group="db")
    assert names == ["db-1"]
    assert _page(engine, host_vars={"rack": "r1"}, limit=1, offset=1)[0] == ["db-3"]
    with pytest.raises(ValidationError, match="is not a variable name"):
        _page(engine, host_vars={"a'b": "x"})


# One rule for a variable compared as text: the console's SQL search (``_vars_match``, on
# PostgreSQL's ``->>`` or SQLite's json_extract) and a target's ``vars.KEY=VALUE``
# (``submission.targets.var_text``, in Python over the stored variables) must find the same
# hosts for every value an inventory can hold.
BEYOND_OLD_SQLITE = {"1e-07", "12345678901234567890"}  # before SQLite 3.38: see SQLITE_RAW_JSON
TYPED = ["r1", "8", 8, 0, -3, 1.5, 2.0, 1e-07, 12345678901234567890, True, False, None,
         ["a"], {"k": 1}, "", "true", "null"]


def test_a_variable_is_compared_as_the_same_text_in_sql_and_in_a_target(
        engine: Engine, tmp_path: Path) -> None:
    import json

    from scheduler.submission.targets import host_vars_map, var_text

    names = [f"h-{i:02}" for i in range(len(TYPED))]
    path = tmp_path / "typed.json"
    path.write_text(json.dumps({"_meta": {"hostvars": {n: {"v": v} for n, v in zip(names, TYPED)}},
                                "typed": {"hosts": names}}))
    import_inventory(engine, path, operator="tester")
    with transaction(engine) as session:
        stored = host_vars_map(session)
    texts = {t for t in map(var_text, TYPED) if t is not None} | {"1e-07", "2", "True", "[\"a\"]"}
    old_sqlite = engine.dialect.name == "sqlite" and not SQLITE_RAW_JSON
    bad = []
    for text in sorted(texts):
        in_sql, _ = _page(engine, host_vars={"v": text}, limit=100)
        in_target = _targeted(f"vars.v={text}", names, stored) \
            if text else [n for n in names if var_text(stored[n].get("v", [])) == ""]  # `v=` is refused
        if in_sql != sorted(in_target) and not (text in BEYOND_OLD_SQLITE and old_sqlite):
            bad.append((text, in_sql, in_target))
    assert not bad, bad


def _targeted(expr: str, names: list[str], stored: dict) -> list[str]:
    from scheduler.submission.targets import resolve_target

    try:
        return resolve_target(expr, names, {"typed": set(names)}, stored)
    except ValidationError as exc:
        assert "selects no hosts" in str(exc)
        return []
