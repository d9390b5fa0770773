"""Helpers for the submission, rollout and task-control tests (tests/submission/test_submit*.py,
tests/rollouts/test_rollout*.py, tests/submission/test_task_control*.py).

- :class:`Cli`: ``fleetsched`` through ``main()`` (the console script's real error handling)
  against a given Redis URL and database URL, as operator ``tester`` unless told otherwise;
- :func:`inventory`: write an INI inventory and import it through the CLI;
- :func:`drain`: copy the event stream into SQL with a real ``Recorder`` until it is empty;
- :func:`sql_snapshot` / :func:`redis_snapshot`: everything in the database / in Redis, to prove
  that a refused submission changed nothing;
- :func:`max_overlap`: the most jobs of a task running at once, from claim/ack/fail event order
  in SQL (stream ids order them exactly, even within one millisecond).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa
from typer.testing import CliRunner

from scheduler.cli.app import main
from scheduler.queue.keys import Keys
from scheduler.record.recorder import Recorder

KEYS = Keys()
TABLES = ("hosts", "groups", "group_hosts", "tasks", "jobs", "events")
ENDS = ("ack", "fail", "retry", "lost", "release", "defer")


class Cli:
    """``fleetsched --redis-url R --database-url D --as OP ARGS`` -> (exit code, stdout, stderr)."""

    def __init__(self, tmp: Path, redis_url: str, database_url: str, env: dict | None = None) -> None:
        self.redis_url = redis_url
        self.database_url = database_url
        self.env = {"XDG_CONFIG_HOME": str(tmp / "config"), "XDG_STATE_HOME": str(tmp / "state"),
                    "FLEETSCHED_CONFIG": None, "FLEETSCHED_DATABASE_URL": None,
                    "FLEETSCHED_REDIS_URL": None, "FLEETSCHED_OPERATOR": None, "NO_COLOR": "1",
                    "COLUMNS": "250", **(env or {})}

    def __call__(self, *args: str, operator: str | None = "tester") -> tuple[int, str, str]:
        argv = ["--redis-url", self.redis_url, "--database-url", self.database_url]
        if operator is not None:
            argv += ["--as", operator]
        runner = CliRunner()
        with runner.isolation(env=self.env) as (out, err, _):
            try:
                main([*argv, *args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            sys.stdout.flush()
            sys.stderr.flush()
            return code, out.getvalue().decode(), err.getvalue().decode()

    def ok(self, *args: str, operator: str | None = "tester") -> str:
        code, out, err = self(*args, operator=operator)
        assert code == 0, f"fleetsched {' '.join(args)} exited {code}\n{out}\n{err}"
        return out

    def submit(self, *args: str, operator: str | None = "tester") -> int:
        """Submit (with --yes) and return the task id printed on stdout."""
        return int(self.ok("submit", *args, "--yes", operator=operator).strip())


def inventory(cli: Cli, tmp: Path, text: str) -> None:
    path = tmp / "inventory.ini"
    path.write_text(text)
    cli.ok("hosts", "import", str(path))


def cli_with_inventory(tmp: Path, redis_url: str, text: str, database_url: str | None = None,
                       *, migrated: Path | None = None) -> Cli:
    """A Cli in ``tmp`` with the INI inventory ``text`` imported, on ``database_url`` (migrated
    here), by default a fresh SQLite record in ``tmp``; or on a copy of ``migrated``, a SQLite
    file migrated once per module (``migrated_sqlite``), which is quicker."""
    from scheduler.record.migrate import upgrade

    if migrated is not None:
        copy = tmp / "fleetsched.db"
        copy.write_bytes(migrated.read_bytes())
        database_url = f"sqlite:///{copy}"
    else:
        database_url = database_url or f"sqlite:///{tmp / 'fleetsched.db'}"
        upgrade(database_url)
    cli = Cli(tmp, redis_url, database_url)
    inventory(cli, tmp, text)
    return cli


def migrated_sqlite(tmp: Path) -> Path:
    """A SQLite record in ``tmp`` at the newest migration (for a module's tests to copy)."""
    from scheduler.record.migrate import upgrade

    path = tmp / "fleetsched.db"
    upgrade(f"sqlite:///{path}")
    return path


def drain(client: redis.Redis, url_or_engine: str | sa.Engine) -> None:
    """Record every event in the stream into SQL (a real Recorder, run to the end)."""
    engine = sa.create_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
    try:
        recorder = Recorder(client, engine, KEYS, "test-drain")
        while recorder.run_once(block_ms=None):
            pass
    finally:
        if isinstance(url_or_engine, str):
            engine.dispose()


def sql_rows(url: str, query: str, **params: Any) -> list[Any]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(query), params).all()
    finally:
        engine.dispose()


def sql_snapshot(url: str) -> dict[str, list]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: sorted(map(repr, conn.execute(sa.text(f"SELECT * FROM {t}")).all()))
                    for t in TABLES}
    finally:
        engine.dispose()


def redis_snapshot(client: redis.Redis) -> dict[str, bytes | None]:
    raw = redis.Redis(connection_pool=client.connection_pool)
    return {k: raw.dump(k) for k in sorted(client.scan_iter("*"))}


def events(url: str, task_id: int, kinds: Iterable[str] | None = None) -> list[Any]:
    """The task's events in SQL in stream order (id is the stream id: ms-seq)."""
    rows = sql_rows(url, "SELECT id, kind, job_id, host, operator, data FROM events "
                         "WHERE task_id = :t", t=str(task_id))
    wanted = set(kinds) if kinds is not None else None
    out = [r for r in rows if wanted is None or r.kind in wanted]
    return sorted(out, key=lambda r: _pos(r.id))


def _pos(event_id: str) -> tuple[int, int]:
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq) if seq.isdigit() else 0


def max_overlap(url: str, *task_ids: int) -> int:
    """The most jobs of the tasks running at once, from claim and end events in SQL."""
    running: set[str] = set()
    most = 0
    evs = sorted((e for t in task_ids for e in events(url, t, ("claim", *ENDS))),
                 key=lambda r: _pos(r.id))
    for e in evs:
        if e.kind == "claim":
            running.add(e.job_id)
            most = max(most, len(running))
        else:
            running.discard(e.job_id)
    return most


def data(row: Any) -> dict[str, Any]:
    return json.loads(row.data) if isinstance(row.data, str) else dict(row.data or {})
