"""Every error path exits with the code of the README's table, with one ``error:`` line.

| code | meaning |
| 1 | failure: Redis or the database cannot be reached; nothing of a task succeeded |
| 2 | usage or validation error, or a request the object's state refuses; nothing changed |
| 3 | partial failure: some jobs failed, others succeeded |
| 4 | not found |
| 5 | cancelled or declined |

One installation serves the whole module (a private Redis server of its own, a SQLite record,
a small inventory and a worker node running the ``local`` executor, so a job's outcome is the
exit code of a command the test chose): tasks that succeeded, partly failed, wholly failed and
were cancelled are made once, then each error path is one parametrized case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import isolated_env, run_cli
from tests.servers import start_redis
from tests.worker_support import WorkerProcess

HOSTS = ["web-01", "web-02", "web-03"]
INVENTORY = "[web]\n" + "\n".join(f"{h} ansible_host=127.0.0.1" for h in HOSTS) + "\n"
LOCAL = ["--executor", "local", "--retries", "0"]
# web-01's job fails, the others succeed: the command tests the host's own name.
PARTLY = 'cmd=["sh", "-c", "test \\"$1\\" != web-01", "sh", "{host.name}"]'


class Installation:
    def __init__(self, tmp: Path, redis_url: str) -> None:
        self.tmp = tmp
        self.env = isolated_env(tmp, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_OPERATOR="alice",
                                FLEETSCHED_DATABASE_URL=f"sqlite:///{tmp / 'record.db'}")
        self.tasks: dict[str, str] = {}

    def cli(self, *args: str, env: dict | None = None) -> tuple[int, str, str]:
        return run_cli(list(args), {**self.env, **(env or {})})

    def ok(self, *args: str) -> str:
        code, out, err = self.cli(*args)
        assert code == 0, f"{' '.join(args)} exited {code}: {err}"
        return out.strip()


@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    tmp = tmp_path_factory.mktemp("exit-codes")
    server = start_redis(tmp_path_factory.mktemp("exit-codes-redis"))
    inst = Installation(tmp, server.url)
    worker = None
    try:
        (tmp / "fleet.ini").write_text(INVENTORY)
        inst.ok("db", "upgrade")
        inst.ok("hosts", "import", str(tmp / "fleet.ini"))
        submit = ["submit", "command", "-t", "group:web", *LOCAL]
        inst.tasks["succeeded"] = inst.ok(*submit, "-p", "cmd=true")
        inst.tasks["partly failed"] = inst.ok(*submit, "-p", PARTLY)
        inst.tasks["all failed"] = inst.ok(*submit, "-p", "cmd=false")
        inst.tasks["cancelled"] = inst.ok(*submit, "-p", "cmd=true", "--in", "1h")
        inst.tasks["pending"] = inst.ok(*submit, "-p", "cmd=true", "--in", "1h")
        inst.ok("tasks", "cancel", inst.tasks["cancelled"])
        worker = WorkerProcess(server.url, tmp / "worker", ["--id", "codes", "--slots", "4",
                                                            "--processes", "1"],
                               env={"FLEETSCHED_DATABASE_URL": inst.env["FLEETSCHED_DATABASE_URL"]})
        worker.start()
        for name in ("succeeded", "partly failed", "all failed"):
            code, _, err = inst.cli("tasks", "wait", inst.tasks[name], "--timeout", "60s")
            assert code in (0, 1, 3), f"task {name} did not end: {err}\n{worker.tail()}"
        inst.ok("recorder", "--drain")
        yield inst
    finally:
        if worker is not None:
            worker.stop()
        server.stop()


def assert_one_error_line(code: int, out: str, err: str) -> None:
    assert "Traceback" not in err
    assert err.startswith("error: "), err
    assert len([line for line in err.splitlines() if line.startswith("error: ")]) == 1


BAD_INPUT = {
    "an unknown option": ["hosts", "list", "--no-such-option"],
    "a bad choice": ["hosts", "list", "--output", "xml"],
    "a missing argument": ["hosts", "show"],
    "an unknown command": ["tasks", "frobnicate"],
    "a bad duration": ["submit", "command", "-t", "web-01", "-p", "cmd=true", "--timeout",
                       "forever"],
    "a bad parameter": ["submit", "command", "-t", "web-01", "-p", "cmd=true", "-p", "zone=x"],
    "a bad target": ["submit", "command", "-t", "group:nope", "-p", "cmd=true"],
    "a bad cron in a schedule": ["schedules", "add", "s1", "--cron", "61 * * * *", "command",
                                 "-t", "web-01", "-p", "cmd=true"],
    "a bad cron in a window": ["windows", "add", "w1", "--cron", "0 25 * * *", "--end-time",
                               "02:00"],
    "a window that ends before it starts": ["windows", "add", "w2", "--start",
                                            "2026-12-06T04:00", "--end", "2026-12-05T20:00"],
    "a bad time zone": ["windows", "add", "w3", "--rrule", "FREQ=DAILY;BYHOUR=1", "--duration",
                        "1h", "--tz", "Mars/Olympus"],
    "a missing inventory file": ["hosts", "import", "no-such-inventory.ini"],
    "a bad setting": ["config", "show"],
    # numbers too large for timedelta or SQLite (an OverflowError traceback before)
    "a timeout of 99999999999 days": ["submit", "command", "-t", "web-01", "-p", "cmd=true",
                                      "--timeout", "99999999999d"],
    "a delay of 99999999999 days": ["submit", "command", "-t", "web-01", "-p", "cmd=true",
                                    "--in", "99999999999d"],
    "a delay just over 100 years": ["submit", "command", "-t", "web-01", "-p", "cmd=true",
                                    "--in", "36526d"],
    "a duration of 400 digits": ["submit", "command", "-t", "web-01", "-p", "cmd=true",
                                 "--timeout", "9" * 400 + "s"],
    "a prune age of 99999999999 days": ["db", "prune", "--older-than", "99999999999d"],
    "a host check timeout of 99999999999 days": ["hosts", "check", "--timeout", "99999999999d"],
    "a report of a task id beyond 64 bits": ["report", "--task", "99999999999999999999999"],
}
BAD_INPUT_ENV = {"a bad setting": {"FLEETSCHED_LEASE_MS": "soon"}}


@pytest.mark.parametrize("case", BAD_INPUT, ids=str)
def test_bad_input_exits_2_and_changes_nothing(inst: Installation, case: str) -> None:
    code, out, err = inst.cli(*BAD_INPUT[case], env=BAD_INPUT_ENV.get(case))
    assert code == 2, err
    assert_one_error_line(code, out, err)


@pytest.mark.parametrize("verb", ["show", "watch", "wait", "output", "cancel"])
def test_a_task_id_beyond_64_bits_exits_2(inst: Installation, verb: str) -> None:
    code, out, err = inst.cli("tasks", verb, "99999999999999999999999")
    assert code == 2, err
    assert_one_error_line(code, out, err)


def test_a_malformed_inventory_file_exits_2(inst: Installation) -> None:
    bad = inst.tmp / "broken.ini"
    bad.write_text("[web\nweb-09 ansible_port=notaport\n")
    code, out, err = inst.cli("hosts", "import", str(bad))
    assert code == 2, err
    assert_one_error_line(code, out, err)


NOT_FOUND = {
    "task": ["tasks", "show", "999"],
    "task to pause": ["tasks", "pause", "999"],
    "task to watch": ["tasks", "watch", "999"],
    "job": ["jobs", "show", "999.0"],
    "host": ["hosts", "show", "nope-99"],
    "host to remove": ["hosts", "remove", "nope-99"],
    "group": ["groups", "remove", "nope"],
    "schedule": ["schedules", "show", "nope"],
    "window": ["windows", "show", "nope"],
    "action": ["actions", "show", "nope"],
    "action to submit": ["submit", "nope", "-t", "web-01"],
}


@pytest.mark.parametrize("case", NOT_FOUND, ids=str)
def test_naming_what_does_not_exist_exits_4(inst: Installation, case: str) -> None:
    code, out, err = inst.cli(*NOT_FOUND[case])
    assert code == 4, err
    assert_one_error_line(code, out, err)


STATE_CONFLICTS = {
    "resume a cancelled task": ("resume", "cancelled"),
    "retry the failed jobs of a cancelled task": ("retry-failed", "cancelled"),
    "pause a cancelled task": ("pause", "cancelled"),
    "reprioritize a cancelled task": ("reprioritize", "cancelled"),
    "pause a task whose jobs have all ended": ("pause", "succeeded"),
}


@pytest.mark.parametrize("case", STATE_CONFLICTS, ids=str)
def test_a_verb_the_tasks_state_refuses_exits_2_not_1(inst: Installation, case: str) -> None:
    verb, which = STATE_CONFLICTS[case]
    extra = ["urgent"] if verb == "reprioritize" else []
    code, out, err = inst.cli("tasks", verb, inst.tasks[which], *extra)
    assert code == 2, err
    assert_one_error_line(code, out, err)


def test_a_fleet_wide_task_without_yes_and_without_a_terminal_is_declined_with_5(
        inst: Installation) -> None:
    code, out, err = inst.cli("submit", "command", "-t", "all", "-p", "cmd=true", *LOCAL)
    assert code == 5, err
    assert_one_error_line(code, out, err)


UNREACHABLE = {
    "redis": {"FLEETSCHED_REDIS_URL": "redis://127.0.0.1:1/0"},
    "database": {"FLEETSCHED_DATABASE_URL": "postgresql+psycopg://u:secret@127.0.0.1:1/x"},
}
NEEDS = {"redis": [["top", "--once"], ["worker", "list"], ["tasks", "pause", "1"],
                   ["tasks", "watch", "1"]],
         "database": [["hosts", "list"], ["tasks", "list"], ["report", "--since", "1d"]]}


@pytest.mark.parametrize("server", UNREACHABLE, ids=str)
def test_a_server_that_cannot_be_reached_exits_1_without_a_password(
        inst: Installation, server: str) -> None:
    for args in NEEDS[server]:
        code, out, err = inst.cli(*args, env=UNREACHABLE[server])
        assert code == 1, f"{' '.join(args)}: {err}"
        assert_one_error_line(code, out, err)
        assert "secret" not in err


# tasks wait / tasks watch once the task has ended (README: 3 is "jobs failed", some or all of
# them: 1 stays for the infrastructure; a cancelled task is 5).
OUTCOMES = {"succeeded": 0, "partly failed": 3, "all failed": 3, "cancelled": 5}


@pytest.mark.parametrize("verb", ["wait", "watch"])
@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_waiting_for_a_task_exits_with_the_code_of_its_outcome(
        inst: Installation, verb: str, outcome: str) -> None:
    code, _, err = inst.cli("tasks", verb, inst.tasks[outcome], "--timeout", "30s")
    assert "Traceback" not in err
    assert code == OUTCOMES[outcome], err


def test_submit_wait_exits_3_when_every_job_failed(inst: Installation) -> None:
    code, _, err = inst.cli("submit", "command", "-t", "group:web", *LOCAL, "-p", "cmd=false",
                            "--wait", "--wait-timeout", "60s")
    assert code == 3, err


def test_submit_wait_exits_3_when_some_jobs_failed_and_others_succeeded(
        inst: Installation) -> None:
    code, _, err = inst.cli("submit", "command", "-t", "group:web", *LOCAL, "-p", PARTLY,
                            "--wait", "--wait-timeout", "60s")
    assert code == 3, err


def test_the_fixture_tasks_ended_as_intended(inst: Installation) -> None:
    # Given the outcome each fixture task was made for, the record agrees (else the exit
    # code tests above would test nothing)
    out = inst.ok("tasks", "list", "-o", "json")
    rows = {str(r["id"]): r for r in json.loads(out)}
    counts = {name: (rows[inst.tasks[name]]["succeeded"], rows[inst.tasks[name]]["failed"],
                     rows[inst.tasks[name]]["cancelled"]) for name in OUTCOMES}
    assert counts == {"succeeded": (3, 0, 0), "partly failed": (2, 1, 0),
                      "all failed": (0, 3, 0), "cancelled": (0, 0, 3)}
