"""A server's ``Stores(hold=True)``: one engine and one Redis client for every request, and
reads that never wait for SQLite's write lock (WAL lets them run beside a writer), real
redis-server and SQLite. Without it each request opened and checked an engine and a Redis
connection, and every read began with BEGIN IMMEDIATE, queueing behind any writer."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from scheduler.config import load_settings
from scheduler.principal import Principal
from scheduler.record.migrate import upgrade
from scheduler.verbs import access, tasks, tokens
from scheduler.verbs.stores import Stores


@pytest.fixture
def settings(tmp_path: Path, redis_url: str):  # type: ignore[no-untyped-def]
    db = tmp_path / "fleetsched.db"
    upgrade(f"sqlite:///{db}")
    (tmp_path / "config.toml").write_text("")
    return load_settings({"redis_url": redis_url, "database_url": f"sqlite:///{db}",
                          "state_dir": tmp_path / "state"},
                         environ={}, config_path=tmp_path / "config.toml")


def test_held_stores_reuse_one_engine_and_one_redis_client_until_closed(settings) -> None:  # type: ignore[no-untyped-def]
    held = Stores(settings, hold=True)
    with held.database() as first, held.database() as second:
        assert first is second
    with held.queue(1) as q1, held.queue(2) as q2:
        assert q1.client is q2.client
    client = q1.client
    held.close()
    # Then a use after close opens afresh
    with held.queue(1) as q3:
        assert q3.client is not client
    held.close()


def test_a_held_read_and_a_token_check_do_not_wait_for_a_writer(
        settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Given a token used a moment ago (its last-used time is not due), and the server's stores
    token = tokens.create(Stores(settings), Principal("admin"), "dash", role="viewer").token
    held = Stores(settings, hold=True)
    access.authenticate(held, token)
    # While another process holds the record's write lock
    writer = sqlite3.connect(tmp_path / "fleetsched.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        start = time.monotonic()
        # When a request checks its token and lists tasks
        who = access.authenticate(held, token)
        listed = tasks.list_(held, limit=10)
        # Then both answer at once, not after the writer (or the 30 s busy timeout)
        assert time.monotonic() - start < 2
        assert (who.name, listed) == ("admin", [])
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        held.close()


def test_a_token_check_writes_its_last_used_time_when_it_is_due(settings) -> None:  # type: ignore[no-untyped-def]
    token = tokens.create(Stores(settings), Principal("admin"), "dash", role="viewer").token
    held = Stores(settings, hold=True)
    try:
        access.authenticate(held, token)
        listed = tokens.list_(Stores(settings), Principal("admin"))
        assert listed[0]["last_used_at"] is not None
    finally:
        held.close()
