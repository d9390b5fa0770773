"""``fleetsched hosts`` and ``groups`` through the console script's own entry point (``main``),
with stdout and stderr captured separately by typer's CliRunner.

typer 0.29's ``CliRunner`` has no ``mix_stderr`` argument: ``result.stdout`` and
``result.stderr`` are always separate, so this module drives ``main()`` inside
``CliRunner.isolation()`` to get the real error handling (``error:``/``hint:`` lines, exit
codes) instead of click's."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
from typer.testing import CliRunner

from scheduler.cli.app import main
from scheduler.queue.keys import Keys
from scheduler.record.migrate import upgrade
from tests.inventory.test_inventory_refusals import BAD

KEYS = Keys()

DATA = Path(__file__).parent / "data" / "inventories"
TABLES = ("hosts", "groups", "group_hosts", "group_children", "events")

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    """Run ``fleetsched --database-url URL --as tester ARGS``: (exit code, stdout, stderr), on
    the session's Redis (``hosts remove`` deletes the host's copy there)."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "FLEETSCHED_CONFIG": None, "FLEETSCHED_DATABASE_URL": None, "NO_COLOR": "1",
           "COLUMNS": "200", "FLEETSCHED_REDIS_URL": redis_url}

    def run(url: str, *args: str) -> tuple[int, str, str]:
        runner = CliRunner()
        with runner.isolation(env=env) as (out, err, _):
            try:
                main(["--database-url", url, "--as", "tester", *args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            sys.stdout.flush()
            sys.stderr.flush()
            return code, out.getvalue().decode(), err.getvalue().decode()

    return run


@pytest.fixture
def db(database_url: str) -> str:
    upgrade(database_url)
    return database_url


def snapshot(url: str) -> dict[str, list]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: sorted(map(tuple, conn.execute(sa.text(f"SELECT * FROM {t}")).all()),
                              key=repr) for t in TABLES}
    finally:
        engine.dispose()


def test_import_prints_the_changes_then_list_show_and_groups_render_them(
        cli: Cli, db: str) -> None:
    code, out, err = cli(db, "hosts", "import", str(DATA / "fleet.ini"))
    assert code == 0, err
    assert out.count("added") == 9
    assert "9 added, 0 updated, 0 removed, 0 unchanged" in err
    # list as JSON, filtered by group (children included) and name pattern
    code, out, err = cli(db, "hosts", "list", "--group", "prod", "--match", "db-*", "-o", "json")
    rows = json.loads(out)
    assert code == 0 and [r["name"] for r in rows] == [
        "db-a.example.com", "db-b.example.com", "db-c.example.com"]
    assert rows[2]["address"] == "2001:db8::c" and rows[0]["user"] == "postgres"
    # list as CSV
    code, out, _ = cli(db, "hosts", "list", "--match", "web0[1-2]*", "-o", "csv")
    parsed = list(csv.DictReader(io.StringIO(out)))
    assert [r["name"] for r in parsed] == ["web01.example.com", "web02.example.com"]
    assert parsed[0]["groups"] == "web" and parsed[0]["port"] == "22"
    # show as JSON
    code, out, _ = cli(db, "hosts", "show", "lb1.example.com", "-o", "json")
    shown = json.loads(out)
    assert (shown["address"], shown["port"], shown["all_groups"]) == (
        "192.0.2.20", 8022, ["frontend", "lb"])
    # groups list as JSON and as a table
    code, out, _ = cli(db, "groups", "list", "-o", "json")
    groups = {g["name"]: g for g in json.loads(out)}
    assert groups["frontend"]["all_hosts"] == 5 and groups["web"]["vars"]["http_port"] == 8081
    code, out, _ = cli(db, "groups", "list")
    assert code == 0 and "frontend" in out and "lb,web" in out


def test_a_dry_run_prints_updated_fields_and_writes_nothing(
        cli: Cli, db: str, tmp_path: Path) -> None:
    inv = tmp_path / "inv.ini"
    inv.write_text("[web]\nw1 ansible_host=10.0.0.1\nw2\n")
    assert cli(db, "hosts", "import", str(inv))[0] == 0
    inv.write_text("[web]\nw1 ansible_host=10.0.0.2\nw3\n")
    before = snapshot(db)
    code, out, err = cli(db, "hosts", "import", str(inv), "--dry-run", "--prune", "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    changes = {(c["change"], c["host"]): c for c in report["changes"]}
    assert set(changes) == {("added", "w3"), ("updated", "w1"), ("removed", "w2")}
    assert changes[("updated", "w1")]["fields"] == ["address"]
    assert "10.0.0.1 -> 10.0.0.2" in changes[("updated", "w1")]["details"]
    assert report["dry_run"] is True and "nothing written" in err
    assert snapshot(db) == before



def test_a_second_import_names_the_group_variables_it_changes_before_writing_them(
        cli: Cli, db: str, tmp_path: Path) -> None:
    inv = tmp_path / "inv.ini"
    inv.write_text("[web]\nw1\nw2\n[web:vars]\nhttp_port=80\ntier=prod\n")
    assert cli(db, "hosts", "import", str(inv))[0] == 0
    # When the file comes back without tier and with another port
    inv.write_text("[web]\nw1\nw2\n[web:vars]\nhttp_port=8080\n")
    before = snapshot(db)
    code, out, err = cli(db, "hosts", "import", str(inv), "--dry-run")
    # Then the dry run has a row for the group saying which of its variables go and change
    assert code == 0, err
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    assert ["updated", "group:web", "vars: -tier ~http_port"] in rows, out
    assert snapshot(db) == before
    # And the import itself says the same, in JSON too, and writes it
    code, out, err = cli(db, "hosts", "import", str(inv), "-o", "json")
    assert code == 0, err
    [group] = [c for c in json.loads(out)["changes"] if c["host"] == "group:web"]
    assert (group["fields"], group["details"]) == (["vars"], "vars: -tier ~http_port")
    code, out, _ = cli(db, "groups", "list", "-o", "json")
    assert {g["name"]: g["vars"] for g in json.loads(out)}["web"] == {"http_port": 8080}

@pytest.fixture(scope="module")
def imported_sqlite(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite database holding the sample fleet, shared by the refusal cases (which must
    leave it unchanged)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('refusals') / 'db.sqlite'}"
    upgrade(url)
    return url


@pytest.mark.parametrize("name,content,where,word", BAD, ids=[b[0] for b in BAD])
def test_every_bad_inventory_exits_2_with_one_line_and_changes_no_row(
        cli: Cli, imported_sqlite: str, tmp_path: Path, name: str, content: bytes, where: str,
        word: str) -> None:
    # SQLite here: the refusal happens before the database is opened; the PostgreSQL case
    # below checks one refusal there. Given a database holding the sample fleet
    url = imported_sqlite
    if not snapshot(url)["hosts"]:
        assert cli(url, "hosts", "import", str(DATA / "fleet.yml"))[0] == 0
    before = snapshot(url)
    # When a bad file is imported with --prune
    bad = tmp_path / name
    bad.write_bytes(content)
    code, out, err = cli(url, "hosts", "import", str(bad), "--prune")
    # Then: exit 2, nothing on stdout, one error line naming file:line (and a hint at most)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith(f"error: {tmp_path / where}"), err
    assert len(lines) <= 2 and all(line.startswith(("error:", "hint:")) for line in lines)
    assert "Traceback" not in err
    # And no row changed
    assert snapshot(url) == before


@pytest.mark.postgres
def test_a_bad_file_on_postgresql_changes_no_row(cli: Cli, fresh_postgres_url: str,
                                                 tmp_path: Path) -> None:
    upgrade(fresh_postgres_url)
    assert cli(fresh_postgres_url, "hosts", "import", str(DATA / "fleet.json"))[0] == 0
    before = snapshot(fresh_postgres_url)
    bad = tmp_path / "dup.ini"
    bad.write_text("[web]\nweb01.example.com ansible_host=10.0.0.1\n"
                   "[db]\nweb01.example.com ansible_host=10.0.0.2\n")
    code, _out, err = cli(fresh_postgres_url, "hosts", "import", str(bad), "--prune")
    assert code == 2 and err.startswith(f"error: {bad}:4:1: ")
    assert snapshot(fresh_postgres_url) == before


def test_add_remove_and_their_refusals(cli: Cli, db: str, redis_client: redis.Redis) -> None:
    code, _out, err = cli(db, "hosts", "add", "edge1", "--address", "10.9.0.1", "--port", "2022",
                          "--user", "ops", "--group", "edge", "--var", "rack=7")
    assert code == 0 and "created group(s) edge" in err
    code, out, _ = cli(db, "hosts", "show", "edge1", "-o", "json")
    assert json.loads(out)["vars"] == {"rack": 7}
    refusals = [
        (["hosts", "add", "x;reboot"], 2, "';'"),
        (["hosts", "add", "x1", "--address", "$(id)"], 2, "--address"),
        (["hosts", "add", "x1", "--user", "root`id`"], 2, "--user"),
        (["hosts", "add", "x1", "--port", "0"], 2, "65535"),
        (["hosts", "add", "x1", "--port", "ssh"], 2, "--port"),
        (["hosts", "add", "x1", "--var", "noequals"], 2, "KEY=VALUE"),
        (["hosts", "add", "edge1"], 2, "already exists"),
        (["hosts", "add", "x1", "--group", "_meta"], 2, "reserved"),
        (["hosts", "add", "x1", "--group", "all"], 2, "implicit group"),
        (["hosts", "show", "nope"], 4, "no host named 'nope'"),
        (["hosts", "remove", "nope"], 4, "no host named 'nope'"),
        (["hosts", "list", "--group", "nope"], 4, "no group named 'nope'"),
        (["hosts", "import", "inv.txt", "--format", "toml"], 2, "--format"),
    ]
    for args, want, word in refusals:
        code, out, err = cli(db, *args)
        assert (code, out) == (want, ""), (args, code, err)
        assert err.startswith("error: ") and word in err.splitlines()[0], (args, err)
    # The host's connection data that fan-outs copied into Redis goes with it
    redis_client.hset(KEYS.host("edge1"), mapping={"address": "10.0.0.9", "port": 22})
    code, _out, err = cli(db, "hosts", "remove", "edge1")
    assert code == 0 and "removed host edge1" in err
    assert json.loads(cli(db, "hosts", "list", "-o", "json")[1]) == []
    assert not redis_client.exists(KEYS.host("edge1"))


def test_groups_remove_drops_the_group_and_its_links_and_keeps_its_hosts(cli: Cli, db: str) -> None:
    assert cli(db, "hosts", "add", "a1", "--group", "old-dc")[0] == 0
    assert cli(db, "hosts", "add", "a2", "--group", "old-dc", "--group", "web")[0] == 0
    code, _out, err = cli(db, "groups", "remove", "old-dc")
    assert code == 0 and "removed group old-dc (2 hosts were in it; they stay)" in err
    groups = {g["name"] for g in json.loads(cli(db, "groups", "list", "-o", "json")[1])}
    assert "old-dc" not in groups and "web" in groups
    assert {h["name"] for h in json.loads(cli(db, "hosts", "list", "-o", "json")[1])} == {"a1", "a2"}
    code, out, err = cli(db, "groups", "remove", "old-dc")
    assert (code, out) == (4, "") and err.startswith("error: no group named 'old-dc'")
    engine = sa.create_engine(db)
    with engine.connect() as conn:
        kinds = list(conn.scalars(sa.text("SELECT kind FROM events WHERE kind = 'group-remove'")))
    engine.dispose()
    assert kinds == ["group-remove"]
