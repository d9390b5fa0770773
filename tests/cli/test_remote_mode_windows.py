"""The window, schedule and live-view commands in remote mode (``fleetsched --server URL`` with
an API token) behave as in direct mode: on one deployment (``tests.cli.remote_support``), each
step is run directly on one object and through the server on another of its own name, and
prints the same stdout, stderr and exit code once the names are made alike; each change
through the server is recorded as the token's principal's. The tests share the module's
deployment, each on objects of its own names."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.cli.remote_support import Deployment, deployment, one_line
from tests.submit_support import data, sql_rows

__all__ = ["deployment"]  # the fixture, found by pytest here
# The module's deployment is made once, on the process that runs all of its tests.
pytestmark = pytest.mark.xdist_group("remote-mode-windows")

Run = Callable[..., tuple[int, str, str]]


def _said(deployment: Deployment, steps: list[list[str]],
          names: dict[str, str]) -> dict[str, list[tuple[int, str, str]]]:
    """Each step run in both modes, ``{name}`` being each mode's own object (``names``), the
    answers with that name (and its JSON's times of this run) made alike."""
    said: dict[str, list[tuple[int, str, str]]] = {}
    for mode, run in (("direct", deployment.direct), ("remote", deployment.remote)):
        name = names[mode]
        said[mode] = []
        for step in steps:
            code, out, err = run(*[a.format(name=name) for a in step])
            said[mode].append((code, out.replace(name, "NAME"), err.replace(name, "NAME")))
    return said


def _token_id(deployment: Deployment) -> int:
    [token] = sql_rows(deployment.api.database_url,
                       "SELECT id FROM api_tokens WHERE name = 'remote-cli'")
    return int(token.id)


def _principals(deployment: Deployment, prefix: str, key: str,
                name: str) -> dict[str, set[str]]:
    """kind -> how its principal was authenticated, of the events of object ``name``."""
    deployment.settled()
    out: dict[str, set[str]] = {}
    for row in sql_rows(deployment.api.database_url,
                        "SELECT kind, operator, data FROM events WHERE kind LIKE :k",
                        k=f"{prefix}%"):
        found = data(row)
        if found.get(key) == name:
            out.setdefault(row.kind, set()).add(f"{row.operator} {found['principal']['via']}")
    return out


WINDOW_STEPS = [
    ["windows", "add", "{name}", "--cron", "0 22 * * SAT", "--end-time", "02:00", "--tz",
     "Europe/Berlin"],
    ["windows", "add", "{name}", "--cron", "0 22 * * SAT", "--duration", "1h"],  # taken
    ["windows", "add", "{name}-json", "--rrule", "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1",
     "--duration", "3h", "--requires-approval", "-o", "json"],
    ["windows", "add", "{name}-bad", "--rrule", "FREQ=SOMETIMES", "--duration", "1h"],
    ["windows", "next", "{name}", "--count", "3"],
    ["windows", "next", "{name}", "-n", "2", "-o", "json"],
    ["windows", "next", "{name}", "--count", "0"],
    ["windows", "next", "nope"],
    ["windows", "assign", "{name}", "--group", "web", "--host", "web-01"],
    ["windows", "assign", "{name}", "--host", "nope-01"],
    ["windows", "assign", "nope", "--group", "web"],
    ["windows", "unassign", "{name}", "--host", "web-01"],
    ["windows", "unassign", "{name}", "--host", "web-01"],  # none left to remove
    ["windows", "edit", "{name}", "--duration", "5h", "--if-version", "1"],
    ["windows", "edit", "{name}", "--duration", "4h", "--if-version", "1"],  # changed since
    ["windows", "edit", "{name}", "--no-requires-approval", "--description", "Saturdays"],
    ["windows", "edit", "{name}"],
    ["windows", "edit", "{name}", "--rrule", "FREQ=SOMETIMES"],
    ["windows", "edit", "nope", "--duration", "1h"],
    ["windows", "show", "{name}", "-o", "json"],
    ["windows", "freeze", "{name}-f", "--start", "2031-01-01T00:00", "--end",
     "2031-01-02T00:00", "--tz", "Europe/Berlin", "--host", "web-02", "--group", "web"],
    ["windows", "freeze", "{name}-g", "--start", "2031-01-02T00:00", "--end",
     "2031-01-01T00:00", "--host", "web-02"],  # ends before it starts
    ["windows", "freeze", "{name}-h", "--start", "2031-01-01T00:00", "--end",
     "2031-01-02T00:00", "--host", "nope-01"],
    ["windows", "remove", "{name}"],
    ["windows", "remove", "{name}"],
    ["windows", "remove", "{name}-f"],
]


def test_window_changes_print_the_same_in_both_modes_and_name_the_token(
        deployment: Deployment) -> None:
    # When the same steps are run on w-direct at the shell and on w-remote through the server
    said = _said(deployment, WINDOW_STEPS, {"direct": "w-direct", "remote": "w-remote"})
    # Then each prints the same, on stderr too, and exits the same
    for step, direct, remote in zip(WINDOW_STEPS, said["direct"], said["remote"]):
        shown = [(code, re.sub(r'"(at|changed_at|created_at)": "[^"]+"', "T", out), err)
                 for code, out, err in (direct, remote)]
        assert shown[0] == shown[1], step
    codes = [code for code, _out, _err in said["remote"]]
    assert codes == [0, 2, 0, 2, 0, 0, 2, 4, 0, 4, 4, 0, 4, 0, 2, 0, 2, 2, 4, 0, 0, 2, 4, 0,
                     4, 0], codes
    # And every refusal is one line (its hint may follow)
    for (code, _out, err), step in zip(said["remote"], WINDOW_STEPS):
        if code:
            one_line(err)
    assert "window NAME: version 2" in said["remote"][13][2]
    assert "is at version 2, not 1" in said["remote"][14][2]
    # And the changes made through the server are the token's, those at the shell local
    token = _token_id(deployment)
    for mode, via in (("direct", "tester local-cli"), ("remote", f"tester token:{token}")):
        name = f"w-{mode}"
        kinds = _principals(deployment, "window-", "window", name)
        assert set(kinds) == {"window-add", "window-assign", "window-unassign", "window-edit",
                              "window-remove"}, kinds
        assert all(vias == {via} for vias in kinds.values()), kinds
        assert _principals(deployment, "window-", "window", f"{name}-f") == {
            "window-add": {via}, "window-assign": {via}, "window-remove": {via}}


SCHEDULE_STEPS = [
    ["schedules", "add", "{name}", "--cron", "0 3 * * *", "--tz", "Europe/Berlin", "command",
     "-t", "group:web", "-p", "cmd=uptime", "--catch-up", "skip", "--max-failures", "1"],
    ["schedules", "add", "{name}", "--cron", "0 3 * * *", "command", "-t", "group:web",
     "-p", "cmd=uptime"],  # taken
    ["schedules", "add", "{name}-json", "--every", "7d", "command", "-t", "web-0*",
     "-p", "cmd=true", "--overlap", "allow", "--catch-up-window", "2h", "-o", "json"],
    ["schedules", "add", "{name}-bad", "--cron", "61 * * * *", "command", "-t", "group:web",
     "-p", "cmd=true"],
    ["schedules", "add", "{name}-act", "--cron", "0 3 * * *", "nope", "-t", "group:web"],
    ["schedules", "add", "{name}-tgt", "--cron", "0 3 * * *", "command", "-t", "group:nope",
     "-p", "cmd=true"],
    ["schedules", "next", "{name}", "--count", "3"],
    ["schedules", "next", "{name}", "-n", "2", "-o", "json"],
    ["schedules", "next", "{name}", "--count", "0"],
    ["schedules", "next", "nope"],
    ["schedules", "pause", "{name}"],
    ["schedules", "pause", "{name}"],
    ["schedules", "resume", "{name}"],
    ["schedules", "resume", "{name}"],
    ["schedules", "pause", "nope"],
    ["schedules", "resume", "nope"],
    ["schedules", "remove", "{name}"],
    ["schedules", "remove", "{name}"],
    ["schedules", "remove", "{name}-json"],
]


def test_schedule_changes_print_the_same_in_both_modes_and_name_the_token(
        deployment: Deployment) -> None:
    said = _said(deployment, SCHEDULE_STEPS, {"direct": "s-direct", "remote": "s-remote"})
    for step, direct, remote in zip(SCHEDULE_STEPS, said["direct"], said["remote"]):
        assert direct == remote, step
    codes = [code for code, _out, _err in said["remote"]]
    assert codes == [0, 2, 0, 2, 4, 2, 0, 0, 2, 4, 0, 0, 0, 0, 4, 4, 0, 4, 0], codes
    for (code, _out, err), step in zip(said["remote"], SCHEDULE_STEPS):
        if code:
            one_line(err)
    assert "schedule NAME armed" in said["remote"][0][2]
    assert "was paused already" in said["remote"][11][2]
    token = _token_id(deployment)
    for mode, via in (("direct", "tester local-cli"), ("remote", f"tester token:{token}")):
        kinds = _principals(deployment, "schedule-", "schedule", f"s-{mode}")
        assert set(kinds) >= {"schedule-add", "schedule-pause", "schedule-resume",
                              "schedule-remove"}, kinds
        assert all(vias == {via} for vias in kinds.values()), kinds


def _frame(text: str) -> str:
    # What differs run to run: the workers' heartbeats (and so the width of their column), the
    # clock, the recorder's trimming
    text = re.sub(r'\d[\dhms.]* ago|"(age_s|now_ms|ms|stream_length)": [\d.]+|stream \d+', "~",
                  text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def test_the_live_views_print_the_same_in_both_modes(deployment: Deployment) -> None:
    done, pending = deployment.done, deployment.pending
    deployment.settled()  # nothing an earlier test did is still on its way to the record
    lines = [["tasks", "watch", str(done), "--once"],
             ["tasks", "watch", str(done), str(pending), "--once", "-o", "json"],
             ["tasks", "watch", str(done), "--once", "-o", "csv"],
             ["tasks", "watch", "999", "--once"], ["tasks", "watch", str(done), "999"],
             ["tasks", "watch", str(pending), "--timeout", "2s", "--interval", "0.2"],
             ["top", "--once"], ["top", "--once", "-o", "json"], ["top", "-o", "csv"]]
    for args in lines:
        direct, remote = deployment.direct(*args), deployment.remote(*args)
        assert (direct[0], _frame(direct[1])) == (remote[0], _frame(remote[1])), args
        if direct[0]:  # the same error, after the same frame where one was drawn
            assert direct[2] == remote[2], args
            assert one_line(direct[2][direct[2].index("error: "):]), args
    assert deployment.remote("tasks", "watch", str(pending), "--once")[0] == 0
    assert str(done) in deployment.remote("top", "--once")[1]
    # And a live watch draws the bars of a task that ended alike, exit 0
    direct, remote = (run("tasks", "watch", str(done)) for run in (deployment.direct,
                                                                    deployment.remote))
    assert direct == remote and direct[0] == 0 and "succeeded" in remote[1]
    # And the failures of one that failed too: the two failed hosts, each with its last
    # lines, then the summary, exit 3
    cli = deployment.api.cli
    failed = cli.submit("command", "-t", "web-01,web-02", "-p", "cmd=false", "--executor",
                        "simulate", "--executor-option", "duration_ms=0", "--executor-option",
                        "failure_rate=1", "--retries", "0")
    assert cli("tasks", "wait", str(failed))[0] == 3
    direct, remote = (run("tasks", "watch", str(failed)) for run in (deployment.direct,
                                                                      deployment.remote))
    assert direct == remote and direct[0] == 3
    assert "fail" in remote[2] and "on web-01" in remote[2] and "on web-02" in remote[2]
