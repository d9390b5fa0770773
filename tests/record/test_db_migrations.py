"""Schema migrations on SQLite and on a real PostgreSQL: up, down, up again; models agree with
the migrations; concurrent upgrades from several nodes do not collide; the scripts are found in
a checkout and in an installed wheel's layout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from scheduler.config import Settings
from scheduler.record import migrate
from scheduler.record.engine import make_engine
from scheduler.record.models import Base

REPO = Path(__file__).resolve().parents[2]


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_leaves_the_full_schema(database_url: str) -> None:
    # Given an empty database
    assert migrate.current(database_url) is None
    # When it is upgraded, downgraded to nothing, and upgraded again
    migrate.upgrade(database_url)
    assert _tables(database_url) == set(Base.metadata.tables)
    migrate.downgrade(database_url, "base")
    assert _tables(database_url) == set()
    assert migrate.current(database_url) is None
    migrate.upgrade(database_url)
    # Then every table is back and the database is at the newest revision
    assert _tables(database_url) == set(Base.metadata.tables)
    assert migrate.current(database_url) == migrate.head()


def test_the_models_and_the_migrations_agree(database_url: str) -> None:
    migrate.upgrade(database_url)
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True,
                                                         "compare_server_default": True})
            diff = compare_metadata(ctx, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_concurrent_upgrades_from_several_nodes_do_not_collide(database_url: str) -> None:
    # Given four nodes (processes) that upgrade an empty database at the same moment
    code = ("import sys, time; from scheduler.record import migrate; "
            "t = float(sys.argv[2]); time.sleep(max(0, t - time.time())); "
            "migrate.upgrade(sys.argv[1])")
    import time
    start = str(time.time() + 1.0)
    procs = [subprocess.Popen([sys.executable, "-c", code, database_url, start],
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [(p.wait(60), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    # Then all succeed and the schema was created exactly once
    assert [rc for rc, _ in results] == [0, 0, 0, 0], [err for _, err in results]
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT version_num FROM alembic_version")).all()
    finally:
        engine.dispose()
    assert [r[0] for r in rows] == [migrate.head()]
    assert _tables(database_url) == set(Base.metadata.tables)


def test_history_lists_every_revision_and_marks_the_current_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    assert not any(r.is_current for r in migrate.history(url))
    migrate.upgrade(url)
    revs = migrate.history(url)
    assert revs[0].down_revision is None
    assert revs[-1].is_head and revs[-1].is_current
    assert all(r.message for r in revs)


def test_an_unknown_revision_is_refused_with_one_line(tmp_path: Path) -> None:
    from scheduler.errors import ValidationError

    with pytest.raises(ValidationError, match="unknown migration revision 'nope'"):
        migrate.upgrade(f"sqlite:///{tmp_path / 'x.db'}", "nope")
    assert not (tmp_path / "x.db").exists() or _tables(f"sqlite:///{tmp_path / 'x.db'}") == set()


def test_the_default_sqlite_file_is_upgraded_automatically(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state")
    migrate.ensure_schema(settings)
    assert migrate.current(settings.effective_database_url) == migrate.head()


def test_head_revision_is_the_newest_script_and_a_current_schema_is_checked_without_alembic(
        tmp_path: Path) -> None:
    # The constant the fast path compares with is the scripts' head (bump it with a migration)
    assert migrate.HEAD_REVISION == migrate.head()
    url = f"sqlite:///{tmp_path / 'current.db'}"
    migrate.upgrade(url)
    # A process that checks a current schema never imports Alembic (about 80 ms of start-up)
    code = ("import sys; from scheduler.config import Settings; "
            "from scheduler.record.migrate import ensure_schema; "
            f"ensure_schema(Settings(database_url={url!r})); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    # One step behind, the fast path gives way to the full check, which names the revisions
    migrate.downgrade(url, "-1")
    with pytest.raises(migrate.SchemaOutOfDateError, match="this fleetsched needs"):
        migrate.ensure_schema(Settings(state_dir=tmp_path, database_url=url))


def test_a_configured_database_is_never_migrated_behind_the_operators_back(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    settings = Settings(state_dir=tmp_path, database_url=url)
    with pytest.raises(migrate.SchemaOutOfDateError) as info:
        migrate.ensure_schema(settings)
    assert info.value.hint == "run fleetsched db upgrade"
    assert migrate.current(url) is None


def test_the_migrations_are_found_in_an_installed_wheel_layout(tmp_path: Path) -> None:
    # Given the layout a wheel installs: scheduler/ with the migrations as scheduler/_migrations
    site = tmp_path / "site"
    shutil.copytree(REPO / "scheduler", site / "scheduler",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "migrations", site / "scheduler" / "_migrations",
                    ignore=shutil.ignore_patterns("__pycache__"))
    db = tmp_path / "w.db"
    code = ("import scheduler.record.migrate as m, sys; print(m.migrations_dir()); "
            f"m.upgrade('sqlite:///{db}'); print(m.current('sqlite:///{db}'))")
    # When a process that sees only that layout upgrades a database
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                         timeout=60)
    # Then it used the shipped scripts
    assert out.returncode == 0, out.stderr
    where, rev = out.stdout.split()
    assert where == str(site / "scheduler" / "_migrations")
    assert rev == migrate.head()


def test_an_index_built_beforehand_by_hand_is_kept_by_the_upgrade(database_url: str) -> None:
    # Given a record at 0006 where the operator built one of 0007's indexes beforehand
    # (on PostgreSQL as docs/guides/install.md says: CONCURRENTLY, outside a transaction)
    migrate.upgrade(database_url, "0006")
    engine = make_engine(database_url).execution_options(isolation_level="AUTOCOMMIT")
    concurrently = "CONCURRENTLY " if engine.dialect.name == "postgresql" else ""
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE INDEX {concurrently}ix_events_job_id_ts "
                                 "ON events (job_id, ts)")
        # When it is upgraded
        migrate.upgrade(database_url)
        # Then the upgrade built the others, and a downgrade drops them all
        names = {ix["name"] for ix in sa.inspect(engine).get_indexes("events")}
        assert {"ix_events_job_id_ts", "ix_events_kind_task_id_ts"} <= names
        migrate.downgrade(database_url, "0006")
        names = {ix["name"] for ix in sa.inspect(engine).get_indexes("events")}
        assert not {"ix_events_job_id_ts", "ix_events_kind_task_id_ts"} & names
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_an_index_a_failed_concurrent_build_left_invalid_is_built_again(
        fresh_postgres_url: str) -> None:
    # Given a record at 0006 where a CREATE INDEX CONCURRENTLY of 0007's index failed, leaving
    # it invalid (as PostgreSQL does when the build is cancelled or hits an error)
    migrate.upgrade(fresh_postgres_url, "0006")
    engine = make_engine(fresh_postgres_url).execution_options(isolation_level="AUTOCOMMIT")

    def valid() -> bool | None:
        with engine.connect() as conn:
            return conn.execute(sa.text(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = 'ix_events_job_id_ts'")).scalar()
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE INDEX CONCURRENTLY ix_events_job_id_ts ON events (job_id, ts)")
            conn.exec_driver_sql("UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
                                 "'ix_events_job_id_ts'::regclass")
        assert valid() is False
        # When it is upgraded
        migrate.upgrade(fresh_postgres_url)
        # Then the index is valid: built again, not skipped for its name
        assert valid() is True
    finally:
        engine.dispose()
