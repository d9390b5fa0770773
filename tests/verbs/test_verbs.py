"""The operator verbs called directly, as the HTTP API will call them: typed arguments and a
principal in, a typed result out, and the principal's name on the record's events. Real
redis-server and SQLite; no CLI in between."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from scheduler.config import load_settings
from scheduler.principal import LOCAL_CLI, Principal
from scheduler.record.migrate import upgrade
from scheduler.submission.request import task_request
from scheduler.submission.taskfile import parse_task_text
from scheduler.verbs import inventory, submit, tasks
from scheduler.verbs.stores import Stores
from tests.submit_support import KEYS, events, sql_rows

ALICE = Principal("alice")


@pytest.fixture
def stores(tmp_path: Path, redis_url: str) -> Stores:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    (tmp_path / "config.toml").write_text("")
    settings = load_settings({"redis_url": redis_url, "database_url": db,
                              "state_dir": tmp_path / "state"},
                             environ={}, config_path=tmp_path / "config.toml")
    return Stores(settings)


@pytest.fixture
def fleet(stores: Stores, tmp_path: Path) -> Stores:
    source = tmp_path / "hosts.ini"
    source.write_text("[web]\nweb-[01:04]\n")
    done = inventory.import_hosts(stores, Principal("importer"), source)
    assert [r["change"] for r in done.changes] == ["added"] * 4
    return stores


def test_a_local_principal_is_the_settings_operator_authenticated_by_the_local_cli(
        stores: Stores) -> None:
    me = Principal.local(stores.settings)
    assert (me.name, me.via) == (stores.settings.operator, LOCAL_CLI)


def test_submit_and_pause_as_a_principal_return_typed_results_and_record_its_name(
        fleet: Stores) -> None:
    # Given a request for the four web hosts, as the CLI and a task file both map it
    request = task_request({"action": "command", "target": "group:web",
                            "params": {"cmd": "true"}, "executor": "simulate",
                            "max_concurrency": "50%"})
    # When alice submits it through the verb
    done = submit.submit(fleet, ALICE, request)
    # Then the result names the task and its jobs, and the record says alice submitted it
    assert isinstance(done, submit.Submission) and done.jobs == 4 and done.operator == "alice"
    (row,) = sql_rows(fleet.settings.database_url, "SELECT operator FROM tasks WHERE id = :t",
                      t=done.task_id)
    assert row.operator == "alice"
    # When bob pauses it through the verb
    change = tasks.pause(fleet, Principal("bob"), done.task_id)
    # Then the result says what happened and by whom, and the pause event is bob's in SQL
    assert change == tasks.TaskChange(task_id=done.task_id, verb="pause", count=change.count,
                                      state="paused", by="bob")
    (pause,) = events(fleet.settings.database_url, done.task_id, ("pause",))
    assert pause.operator == "bob"


def test_a_dry_run_submit_plans_and_writes_nothing(fleet: Stores) -> None:
    request = task_request({"action": "command", "target": "web-0[12]",
                            "params": {"cmd": "true"}, "executor": "simulate"})
    done = submit.submit(fleet, ALICE, request, dry_run=True)
    assert done.task_id is None and sorted(h.name for h in done.plan.hosts) == ["web-01", "web-02"]
    assert sql_rows(fleet.settings.database_url, "SELECT id FROM tasks") == []


def test_removing_a_host_drops_its_connection_data_from_the_queue(
        fleet: Stores, redis_client: redis.Redis) -> None:
    # Given a task submitted to web-01, so Redis holds a copy of its connection data
    request = task_request({"action": "command", "target": "web-01",
                            "params": {"cmd": "true"}, "executor": "simulate"})
    submit.submit(fleet, ALICE, request)
    assert redis_client.exists(KEYS.host("web-01"))
    # When alice removes the host
    done = inventory.remove_host(fleet, ALICE, "web-01")
    # Then the copy is gone and nothing needed saying
    assert not redis_client.exists(KEYS.host("web-01")) and done.notes == []


def test_the_cli_options_and_a_task_file_map_to_the_same_request() -> None:
    given = {"action": "command", "target": "group:web", "params": {"cmd": "uptime"},
             "at": "2026-12-01T22:00+00:00", "max_failures": "10%", "timeout": "5m",
             "backoff": "0s", "waves": "1,50%", "wave_gate": "approve"}
    from_options = task_request(given)
    from_file = parse_task_text(
        "action: command\ntarget: group:web\nparams: {cmd: uptime}\n"
        "at: 2026-12-01T22:00+00:00\nmax_failures: 10%\ntimeout: 5m\nbackoff: 0s\n"
        "waves: 1,50%\nwave_gate: approve\n")
    assert from_options == from_file
    assert from_options.timeout_s == 300.0 and from_options.backoff_s == 0.0
