"""``fleetsched recorder --drain`` and ``fleetsched recorder status`` through the console entry
point, against a real redis-server and the default-style SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import redis
import sqlalchemy as sa

from scheduler.queue.keys import Keys
from scheduler.record import migrate
from scheduler.record.engine import make_engine
from tests.recorder_events import job_lifecycle, xadd_all
from tests.cli.test_config import run_cli


def test_recorder_drain_records_the_stream_and_status_shows_no_lag(
        tmp_path: Path, redis_client: redis.Redis, redis_url: str) -> None:
    # Given events in the stream and a database that is not created yet
    ids = xadd_all(redis_client, job_lifecycle("7", [("7.0", "a"), ("7.1", "b")]))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    env = {"XDG_STATE_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    args = ["--database-url", url, "--redis-url", redis_url]
    # When the recorder runs on a configured database that does not exist: refused, nothing made
    code, _, err = run_cli([*args, "recorder", "--drain"], env)
    assert code == 2 and "no SQLite database at" in err and "db upgrade" in err, err
    assert not (tmp_path / "r.db").exists()
    # When it runs on a configured database without a schema
    (tmp_path / "r.db").touch()
    code, _, err = run_cli([*args, "recorder", "--drain"], env)
    # Then it refuses and says what to do
    assert code == 1 and "run fleetsched db upgrade" in err
    # When the schema exists, Then it records everything and reports it
    migrate.upgrade(url)
    code, _, err = run_cli([*args, "recorder", "--drain", "--consumer", "cli"], env)
    assert code == 0, err
    assert f"{len(ids)} events" in err
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM events")).scalar_one() == len(ids)
    engine.dispose()
    code, out, _ = run_cli([*args, "recorder", "status", "-o", "json"], env)
    status = json.loads(out)
    assert code == 0 and status["lag"] == 0 and status["pending"] == 0
    assert status["stream"] == Keys().events
