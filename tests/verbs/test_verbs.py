"""The operator verbs called directly, as the HTTP API will call them: typed arguments and a
principal in, a typed result out, and the principal's name on the record's events; a refused
input is the error the CLI shows. Real redis-server and SQLite; no CLI in between but for that
comparison."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from scheduler.config import load_settings
from scheduler.errors import FleetschedError, NotFoundError, ValidationError
from scheduler.principal import LOCAL_CLI, Principal
from scheduler.record.migrate import upgrade
from scheduler.schedules.store import ScheduleSpec
from scheduler.submission.request import task_request
from scheduler.submission.taskfile import parse_task_text
from scheduler.verbs import inventory, schedules, status, submit, tasks, windows
from scheduler.verbs.stores import Stores
from scheduler.windows.store import WindowSpec
from tests.submit_support import KEYS, Cli, events, sql_rows

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
    task = submit.submit(fleet, ALICE, request).task_id
    assert redis_client.exists(KEYS.host("web-01"))
    # When alice removes the host
    done = inventory.remove_host(fleet, ALICE, "web-01")
    # Then the copy is gone, and the one thing said is that the task's job has not ended
    assert not redis_client.exists(KEYS.host("web-01"))
    assert [n.split(":")[0] for n in done.notes] == ["warning"], done.notes
    assert f"web-01 had 1 job(s) not ended yet (task(s) {task})" in done.notes[0]


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


def kind_events(url: str, kind: str) -> list[Any]:
    return sql_rows(url, "SELECT operator, data FROM events WHERE kind = :k", k=kind)


def test_a_customer_approves_a_window_through_the_verb_and_the_record_names_the_approver(
        fleet: Stores, redis_client: redis.Redis) -> None:
    # Given a weekly window that needs approval, added and assigned to the web group by alice
    spec = WindowSpec(name="acme", rrule="FREQ=WEEKLY;BYDAY=SA;BYHOUR=22", duration="4h",
                      tz="America/New_York", requires_approval=True)
    added = windows.add(fleet, ALICE, spec)
    assert (added.name, added.kind, added.requires_approval, added.by, added.notes) == (
        "acme", "recurring", True, "alice", [])
    assert added.as_dict() == {"name": "acme", "kind": "recurring",
                               "next_open_utc": added.next_open_utc}
    assigned = windows.assign(fleet, ALICE, "acme", groups=["web"])
    assert assigned == windows.WindowChange(window="acme", verb="assign", by="alice", count=1)
    assert redis_client.hget(KEYS.window("acme"), "approved") == "0"
    # When carol, the customer's approver, approves it through the verb
    approval = windows.approve(fleet, Principal("carol"), "acme")
    # Then the result, the window's row, its event and the queue's copy all say carol approved
    assert (approval.window, approval.by, approval.notes) == ("acme", "carol", [])
    url = fleet.settings.database_url
    (row,) = sql_rows(url, "SELECT approved_by, created_by FROM windows WHERE name = 'acme'")
    assert (row.approved_by, row.created_by) == ("carol", "alice")
    (event,) = kind_events(url, "window-approve")
    assert event.operator == "carol"
    assert [e.operator for e in kind_events(url, "window-assign")] == ["alice"]
    assert redis_client.hget(KEYS.window("acme"), "approved") == "1"
    assert windows.show(fleet, "acme")["approved_by"] == "carol"


def test_schedules_add_and_pause_through_the_verbs_record_each_principal(fleet: Stores) -> None:
    # Given a nightly command on the four web hosts
    request = task_request({"action": "command", "target": "group:web",
                            "params": {"cmd": "true"}, "executor": "simulate"})
    spec = ScheduleSpec(name="nightly", request=request, cron="0 3 * * *", tz="Europe/Berlin")
    # When alice adds it
    added = schedules.add(fleet, ALICE, spec)
    # Then it is armed for its next occurrence, for the four hosts, as alice's
    assert (added.name, added.cron, added.tz, added.hosts, added.by) == (
        "nightly", "0 3 * * *", "Europe/Berlin", 4, "alice")
    assert added.next is not None and list(added.as_dict()) == [
        "name", "cron", "tz", "explain", "next", "hosts"]
    # When bob pauses it, and then pauses it again
    paused = schedules.pause(fleet, Principal("bob"), "nightly")
    again = schedules.pause(fleet, Principal("bob"), "nightly")
    # Then the first changed it and the second found nothing to do; the events name each one
    assert paused == schedules.ScheduleChange(schedule="nightly", verb="pause", by="bob")
    assert again.changed is False
    url = fleet.settings.database_url
    assert [e.operator for e in kind_events(url, "schedule-add")] == ["alice"]
    assert [e.operator for e in kind_events(url, "schedule-pause")] == ["bob"]
    (row,) = sql_rows(url, "SELECT created_by, paused FROM schedules WHERE name = 'nightly'")
    assert row.created_by == "alice" and row.paused
    assert schedules.show(fleet, "nightly")["paused"]


def test_the_reads_the_api_needs_are_verbs_too(fleet: Stores) -> None:
    # Given four web hosts and a task queued for two of them, no worker running
    request = task_request({"action": "command", "target": "web-0[12]",
                            "params": {"cmd": "true"}, "executor": "simulate"})
    done = submit.submit(fleet, ALICE, request)
    # Then the inventory, the queue's frame and the health checks read through the verbs
    assert [h["name"] for h in inventory.list_hosts(fleet, match="web-0[34]")] == [
        "web-03", "web-04"]
    assert inventory.show_host(fleet, "web-02")["all_groups"] == ["web"]
    assert [(g["name"], g["hosts"]) for g in inventory.list_groups(fleet)
            if g["name"] == "web"] == [("web", 4)]
    assert sorted(inventory.export_hosts(fleet, "group:web").hosts) == [
        "web-01", "web-02", "web-03", "web-04"]
    frame = status.snapshot(fleet)
    assert (frame.due_now, frame.shards_down) == (2, [])
    assert [t.task_id for t in frame.tasks] == [str(done.task_id)]
    assert [f.level for f in status.status(fleet) if f.check == "workers"] == ["fail"]
    # And a job of the task is in the record, with no attempt yet
    view = tasks.job(fleet, f"{done.task_id}.1")
    assert (view.task, view.attempts) == (done.task_id, []) and view.host in ("web-01", "web-02")


def _sun(stores: Stores) -> None:
    """A weekly window that needs no approval."""
    windows.add(stores, ALICE, WindowSpec(name="sun", rrule="FREQ=WEEKLY;BYDAY=SU;BYHOUR=1",
                                          duration="3h"))


def _approve_a_window_that_needs_none(stores: Stores) -> None:
    _sun(stores)
    windows.approve(stores, ALICE, "sun")


def _assign_a_window_to_nothing(stores: Stores) -> None:
    _sun(stores)
    windows.assign(stores, ALICE, "sun")


def _assign_a_window_to_an_unknown_group(stores: Stores) -> None:
    _sun(stores)
    windows.assign(stores, ALICE, "sun", groups=["nope"])


def _add_a_schedule_with_a_bad_cron(stores: Stores) -> None:
    request = task_request({"action": "command", "target": "group:web",
                            "params": {"cmd": "true"}, "executor": "simulate"})
    schedules.add(stores, ALICE, ScheduleSpec(name="bad", request=request, cron="61 * * * *"))


def _pause_an_unknown_schedule(stores: Stores) -> None:
    schedules.pause(stores, ALICE, "nope")


# (the verb's refused call, its error, the same input to the CLI)
REFUSED: list[tuple[Callable[[Stores], None], type[FleetschedError], list[str]]] = [
    (_approve_a_window_that_needs_none, ValidationError, ["windows", "approve", "sun"]),
    (_assign_a_window_to_nothing, ValidationError, ["windows", "assign", "sun"]),
    (_assign_a_window_to_an_unknown_group, NotFoundError,
     ["windows", "assign", "sun", "--group", "nope"]),
    (_add_a_schedule_with_a_bad_cron, ValidationError,
     ["schedules", "add", "bad", "command", "--cron", "61 * * * *", "-t", "group:web",
      "-p", "cmd=true", "--executor", "simulate"]),
    (_pause_an_unknown_schedule, NotFoundError, ["schedules", "pause", "nope"]),
]


@pytest.mark.parametrize(("call", "error", "argv"), REFUSED,
                         ids=[call.__name__.strip("_") for call, _e, _a in REFUSED])
def test_a_refused_input_raises_the_error_the_cli_shows(
        fleet: Stores, tmp_path: Path, redis_url: str, call: Callable[[Stores], None],
        error: type[FleetschedError], argv: list[str]) -> None:
    # When the verb is called with the refused input
    with pytest.raises(error) as refused:
        call(fleet)
    exc = refused.value
    # Then the CLI, given the same input on the same record, shows that error and its hint and
    # exits with its code
    code, out, err = Cli(tmp_path, redis_url, fleet.settings.database_url)(*argv)
    shown = f"error: {exc}\n" + (f"hint: {exc.hint}\n" if exc.hint else "")
    assert (code, out, err) == (exc.exit_code, "", shown)
