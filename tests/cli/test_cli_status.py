"""``fleetsched status`` and ``fleetsched doctor`` against real Redis servers and SQLite files:
healthy exits 0, every unhealthy condition exits 1 with the failing check named and a hint."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.keys import Keys
from scheduler.record.engine import make_engine
from scheduler.record.migrate import upgrade
from scheduler.record.models import Task
from scheduler.record.types import utcnow
from tests.cli_support import isolated_env, run_cli


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(url)
    return url


def status(env: dict, *args: str) -> tuple[int, dict, str]:
    code, out, err = run_cli(["status", "--output", "json", *args], env)
    assert "Traceback" not in err
    return code, json.loads(out), err


def check(report: dict, name: str) -> dict:
    found = [c for c in report["checks"] if c["check"] == name]
    assert found, f"no {name} check in {report}"
    return found[0]


def test_status_is_healthy_with_redis_a_current_database_and_nothing_due(
        tmp_path: Path, redis_url: str, db: str) -> None:
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db)
    code, report, _ = status(env)
    assert code == 0
    assert report["healthy"] is True
    assert check(report, "redis")["level"] == "ok"
    assert check(report, "eviction")["level"] == "ok"
    assert check(report, "database")["level"] == "ok"
    assert check(report, "submissions")["level"] == "ok"
    # No worker and nothing due is worth a warning, not a failure.
    assert check(report, "workers")["level"] == "warn"


def test_status_fails_when_redis_cannot_be_reached(tmp_path: Path, db: str) -> None:
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL="redis://127.0.0.1:1/0",
                       FLEETSCHED_DATABASE_URL=db)
    code, report, err = status(env)
    assert code == 1
    assert check(report, "redis")["level"] == "fail"
    assert check(report, "redis")["hint"]
    assert "unhealthy: redis" in err


def test_status_never_starts_the_embedded_redis(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    code, out, err = run_cli(["status"], env)
    assert code == 0, err
    assert "fleetsched redis start" in out
    assert not (tmp_path / "state" / "fleetsched" / "redis" / "redis.pid").exists()


def test_status_and_doctor_agree_on_a_fresh_install(tmp_path: Path) -> None:
    # Given an empty state directory and no config file: the embedded default, never started
    env = isolated_env(tmp_path)
    # When both look at it
    status_code, status_report, _ = status(env)
    doctor_code, out, err = run_cli(["doctor", "--output", "json"], env)
    doctor_report = json.loads(out)
    # Then neither calls it broken, and they say the same about Redis and the database
    assert (status_code, status_report["healthy"]) == (0, True)
    assert (doctor_code, doctor_report["healthy"]) == (0, True), err
    for name in ("redis", "database"):
        assert check(status_report, name)["level"] != "fail"
        assert check(doctor_report, name)["level"] != "fail"
    assert "starts it" in check(status_report, "redis")["hint"]
    assert "starts it" in check(doctor_report, "redis")["message"]


@pytest.mark.parametrize("url", ["postgresql+pg8000://fleetsched:pw@db/fleetsched",
                                 "postgresql+asyncpg://fleetsched@db/fleetsched"])
@pytest.mark.parametrize("command", [["status"], ["hosts", "list"], ["db", "upgrade"]])
def test_a_postgresql_url_whose_driver_is_missing_names_the_extra_to_install(
        tmp_path: Path, url: str, command: list[str]) -> None:
    # Given a database_url naming a PostgreSQL driver that is not installed
    env = isolated_env(tmp_path, FLEETSCHED_DATABASE_URL=url)
    # When a command needs the database
    code, _, err = run_cli(command, env)
    # Then it is a bad setting (2) said in one line with the extra to install, no password
    assert code == 2, err
    first = err.splitlines()[0]
    assert first.startswith("error: database_url names the PostgreSQL driver ")
    assert "pip install 'fleetsched[postgres]'" in first
    assert "pw" not in err and "Traceback" not in err


def test_status_fails_when_redis_may_evict_queued_jobs(tmp_path: Path, private_redis, db: str) -> None:
    redis.Redis.from_url(private_redis.url).config_set("maxmemory-policy", "allkeys-lru")
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=private_redis.url, FLEETSCHED_DATABASE_URL=db)
    code, report, _ = status(env)
    assert code == 1
    assert check(report, "eviction")["level"] == "fail"
    assert "noeviction" in check(report, "eviction")["hint"]


def test_status_fails_when_jobs_are_due_and_no_worker_is_alive(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, db: str) -> None:
    # Given a job due now and no worker heartbeat
    queue = Queue(redis_client, Keys())
    queue.create_task(TaskSpec("t1"))
    queue.enqueue("t1", [JobSpec("t1.0", "web-01")])
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db)
    # When status looks
    code, report, _ = status(env)
    # Then it fails on workers and counts the due job
    assert code == 1
    workers = check(report, "workers")
    assert workers["level"] == "fail" and "fleetsched worker" in workers["hint"]
    assert check(report, "queue")["data"]["due_now"] == 1


def test_status_counts_a_live_worker_heartbeat(tmp_path: Path, redis_url: str,
                                               redis_client: redis.Redis, db: str) -> None:
    import time

    redis_client.hset(Keys().workers, "w1", json.dumps(
        {"node": "n1", "pid": 1, "slots": 8, "busy": 3, "ms": int(time.time() * 1000)}))
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db)
    code, report, _ = status(env)
    assert code == 0
    assert check(report, "workers")["data"] == {"alive": 1, "stale": 0, "silent": 0, "slots": 8,
                                                  "busy": 3}


def test_status_lists_tasks_stuck_in_accepted(tmp_path: Path, redis_url: str, db: str) -> None:
    # Given a task recorded ten minutes ago that never reached the queue
    engine = make_engine(db)
    with engine.begin() as conn:
        conn.execute(Task.__table__.insert(), [{"id": 7, "action": "command", "operator": "alice",
                                                "state": "accepted", "params": {},
                                                "created_at": utcnow() - timedelta(minutes=10)}])
    engine.dispose()
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db)
    code, report, _ = status(env)
    assert code == 1
    stuck = check(report, "submissions")
    assert stuck["level"] == "fail"
    assert stuck["data"]["tasks"] == [7]


def test_status_says_to_upgrade_a_database_without_the_schema(tmp_path: Path, redis_url: str) -> None:
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url,
                       FLEETSCHED_DATABASE_URL=f"sqlite:///{tmp_path / 'empty.db'}")
    code, report, _ = status(env)
    assert code == 1
    assert check(report, "database")["hint"] == "run fleetsched db upgrade"


# ---------------------------------------------------------------------------------- doctor


def doctor(env: dict) -> tuple[int, dict]:
    code, out, err = run_cli(["doctor", "--output", "json"], env)
    assert "Traceback" not in err
    return code, json.loads(out)


def test_doctor_flags_a_private_key_readable_by_others_and_says_how_to_fix_it(
        tmp_path: Path, redis_url: str, db: str) -> None:
    key = tmp_path / "id_ed25519"
    key.write_text("not really a key\n")
    key.chmod(0o644)
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db,
                       FLEETSCHED_SSH_IDENTITY_FILE=str(key))
    code, report = doctor(env)
    assert code == 1
    finding = check(report, "ssh-key")
    assert finding["level"] == "fail"
    assert finding["hint"] == f"chmod 600 {key}"
    # When the operator follows the hint, the finding is gone
    key.chmod(0o600)
    code, report = doctor(env)
    assert check(report, "ssh-key")["level"] == "ok"


def test_doctor_warns_about_a_missing_default_known_hosts_file(tmp_path: Path, redis_url: str,
                                                                 db: str) -> None:
    # Given no known_hosts setting and a home without ~/.ssh/known_hosts
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db,
                       HOME=str(tmp_path / "home"), FLEETSCHED_KNOWN_HOSTS=None)
    _code, report = doctor(env)
    finding = check(report, "known_hosts")
    assert finding["level"] == "warn"
    assert "ssh-keyscan" in finding["hint"]


def test_doctor_fails_on_a_configured_known_hosts_file_that_does_not_exist(
        tmp_path: Path, redis_url: str, db: str) -> None:
    # Given a known_hosts setting naming a file that is not there
    missing_file = tmp_path / "nowhere" / "known_hosts"
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db,
                       FLEETSCHED_KNOWN_HOSTS=str(missing_file))
    code, report = doctor(env)
    # Then doctor fails on it, naming the path and the setting, and says how to fix it
    assert code == 1
    finding = check(report, "known_hosts")
    assert finding["level"] == "fail"
    assert finding["message"].startswith(
        f"known_hosts file {missing_file} (setting known_hosts) does not exist")
    assert "FLEETSCHED_KNOWN_HOSTS" in finding["hint"] and "ssh-keyscan" in finding["hint"]


def test_doctor_fails_on_a_configured_identity_file_that_does_not_exist(
        tmp_path: Path, redis_url: str, db: str) -> None:
    there = tmp_path / "id_there"
    there.write_text("not really a key\n")
    there.chmod(0o600)
    gone = tmp_path / "id_gone"
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db,
                       FLEETSCHED_SSH_IDENTITY_FILE=f"{there},{gone}")
    code, report = doctor(env)
    assert code == 1
    keys = [f for f in report["checks"] if f["check"] == "ssh-key"]
    assert [f["level"] for f in keys] == ["ok", "fail"]
    assert keys[1]["message"].startswith(
        f"identity file {gone} (setting ssh_identity_file) does not exist")
    assert "FLEETSCHED_SSH_IDENTITY_FILE" in keys[1]["hint"]


def test_doctor_warns_when_redis_keeps_no_append_only_file(tmp_path: Path, private_redis, db: str) -> None:
    assert not private_redis.appendonly
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=private_redis.url, FLEETSCHED_DATABASE_URL=db)
    _code, report = doctor(env)
    assert check(report, "aof")["level"] == "warn"
    private_redis.restart(appendonly=True)
    _code, report = doctor(env)
    assert check(report, "aof")["level"] == "ok"


def test_doctor_reports_an_invalid_configuration_as_a_finding_not_a_crash(tmp_path: Path) -> None:
    env = isolated_env(tmp_path, FLEETSCHED_LEASE_MS="10")
    code, report = doctor(env)
    assert code == 1
    assert check(report, "config")["level"] == "fail"
    assert "lease_ms" in check(report, "config")["message"]


def test_doctor_says_the_schema_is_behind_on_a_configured_database(tmp_path: Path, redis_url: str) -> None:
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url,
                       FLEETSCHED_DATABASE_URL=f"sqlite:///{tmp_path / 'new.db'}")
    code, report = doctor(env)
    assert code == 1
    assert check(report, "database")["hint"] == "run fleetsched db upgrade"


def test_doctor_table_output_has_one_line_per_finding_with_hints(tmp_path: Path, redis_url: str,
                                                                  db: str) -> None:
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=db,
                       HOME=str(tmp_path / "home"), FLEETSCHED_KNOWN_HOSTS=None)
    _code, out, _err = run_cli(["doctor"], env)
    assert "WARN" in out and "known_hosts" in out
    assert "hint: ssh-keyscan" in out
    assert "\x1b[" not in out  # NO_COLOR


