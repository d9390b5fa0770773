"""The CLI in remote mode (``fleetsched --server URL`` with an API token) behaves as in direct
mode: on one deployment (a real ``fleetsched server``, redis-server, a SQLite record and a
worker node on the simulate executor), each command line of ``SAME`` is run directly and
through the server, and prints the same stdout with the same exit code. Then what only remote
mode has: a bad token, ``--as``, a command that needs direct mode, a server that is down, each
refused in one line. The tests share the module's deployment (tests/cli/remote_support.py),
each on tasks, windows and tokens of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.remote_support import (
    READING,
    SIMULATE,
    Deployment,
    deployment,
    normalised,
    one_line,
)
from tests.cli_support import isolated_env, run_cli
from tests.servers import free_port
from tests.submit_support import data, events, sql_rows

__all__ = ["deployment"]  # the fixture, found by pytest here
# The module's deployment is made once, on the process that runs all of its tests.
pytestmark = pytest.mark.xdist_group("remote-mode")


SAME = [
    "status", "status -o json", "tasks list", "tasks list -o json", "tasks list -o csv",
    "tasks list --operator tester --state succeeded", "tasks list --limit 1",
    "tasks show {done}", "tasks show {done} -o json", "tasks show {done} --events",
    "tasks show {pending}", "tasks show 999", "tasks output {done}", "tasks output {done} -o json",
    "tasks output {done} --host web-03", "tasks output {done} --failed", "tasks output 999",
    "tasks output {done} --grep '('", "tasks wait {done}", "tasks wait 999", "tasks wait {pending} --timeout 1s",
    "jobs show {done}.1", "jobs show {done}.1 -o json", "jobs show {done}.1 -o csv",
    "jobs show 999.1", "hosts list", "hosts list -o json", "hosts list -o csv",
    "hosts list --match 'web-0[12]'", "hosts show web-01", "hosts show web-01 -o json",
    "hosts show nope", "hosts history web-01", "hosts history web-01 -o csv --limit 2",
    "groups list", "groups list -o json", "groups list -o csv", "windows list",
    "windows list -o json", "windows show sun-night", "windows show sun-night -o json",
    "windows show nope", "schedules list", "schedules list -o json", "schedules show nightly",
    "schedules show nightly -o json", "schedules show nope", "report", "report --all-jobs",
    "report -o csv", "report --task {done} --state failed", "report --since nonsense",
    "submit command -t group:web -p cmd=uptime --dry-run",
    "submit command -t group:web -p cmd=uptime --dry-run -o json",
    "submit command -t 'web-0*,!web-03' -p cmd=uptime --waves 1,50% --dry-run",
    "submit command -t group:nope -p cmd=uptime --yes", "submit nope -t group:web --yes",
    "submit command -t group:web -p cmd=uptime --max-failures 200% --yes",
    "tasks pause 999", "tasks reprioritize {done} sideways", "windows approve nope",
]


def test_every_command_line_prints_the_same_in_direct_and_remote_mode(
        deployment: Deployment) -> None:
    import shlex

    deployment.settled()  # nothing an earlier test did is still on its way to the record
    differ = []
    for line in SAME:
        args = shlex.split(line.format(done=deployment.done, pending=deployment.pending))
        direct, remote = deployment.direct(*args), deployment.remote(*args)
        if (direct[0], normalised(direct[1])) != (remote[0], normalised(remote[1])):
            differ.append(f"{line}:\n  direct {direct}\n  remote {remote}")
        elif direct[0] not in (0, 3) and direct[2] != remote[2]:  # an error: the same one line
            differ.append(f"{line}: stderr\n  direct {direct[2]!r}\n  remote {remote[2]!r}")
    assert not differ, "\n".join(differ)
    # And report --html writes the same page from the server's report
    pages = []
    for run, name in ((deployment.direct, "direct.html"), (deployment.remote, "remote.html")):
        path = Path(deployment.api.database_url.removeprefix("sqlite:///")).parent / name
        assert run("report", "--html", str(path))[:2] == (0, "")
        pages.append(re.sub(r"\d{4}-\d\d-\d\d[ T][\d:.]+(\+00:00|Z| UTC)?", "T",
                            path.read_text()))
    assert pages[0] == pages[1] and "web-01" in pages[0]


def test_the_controls_say_the_same_in_both_modes_and_the_events_name_the_token(
        deployment: Deployment) -> None:
    cli = deployment.api.cli
    # Given two tasks waiting an hour, one controlled at the shell and one through the server
    tasks = [cli.submit("command", "-t", "group:web", "-p", "cmd=true", *SIMULATE, "--in", "1h")
             for _ in range(2)]
    steps = [["pause"], ["resume"], ["reprioritize", "{t}", "urgent"], ["retry-failed"],
             ["continue"], ["cancel"], ["pause"]]
    said = {}
    for mode, task in zip(("direct", "remote"), tasks):
        run = deployment.direct if mode == "direct" else deployment.remote
        said[mode] = []
        for step in steps:
            args = [a.format(t=task) for a in step] if len(step) > 1 else [step[0], str(task)]
            code, out, err = run("tasks", *args)
            said[mode].append((code, out, err.replace(f"task {task} ", "task T ")))
    # Then each step prints the same (on stderr too) and exits the same in both modes
    assert said["direct"] == said["remote"]
    deployment.settled()
    assert [code for code, _out, _err in said["remote"]] == [0, 0, 0, 0, 2, 0, 2]
    # And the events say how the principal was authenticated: at a shell, or by the token
    [token_id] = [r.id for r in sql_rows(deployment.api.database_url,
                                         "SELECT id FROM api_tokens WHERE name = 'remote-cli'")]
    for task, via in zip(tasks, ("local-cli", f"token:{token_id}")):
        [paused, *_] = events(deployment.api.database_url, task, kinds=("pause",))
        assert (paused.operator, data(paused)["principal"]["via"]) == ("tester", via)


def test_submit_in_remote_mode_prints_the_id_and_a_repeated_key_gets_the_same_task(
        deployment: Deployment) -> None:
    args = ["submit", "command", "-t", "group:web", "-p", "cmd=true", *SIMULATE, "--in", "1h",
            "--yes"]
    # When a task is submitted through the server, twice with one idempotency key
    code, out, err = deployment.remote(*args, "--idempotency-key", "ci-42")
    assert code == 0 and out.strip().isdigit(), err
    first = int(out)
    again = deployment.remote(*args, "--idempotency-key", "ci-42")
    # Then the second answer is the first task, said as a direct submit says it
    assert again[:2] == (0, f"{first}\n")
    assert f"task {first} was already submitted with idempotency key ci-42" in again[2]
    # And the same key with another request is refused as in direct mode (exit 2, one line)
    changed = [a.replace("cmd=true", "cmd=false") for a in args]
    code, out, err = deployment.remote(*changed, "--idempotency-key", "ci-42")
    assert (code, out) == (2, "") and "ci-42" in one_line(err)
    # And a submit without --yes is planned first: a fleet-wide one needs a terminal
    code, out, err = deployment.remote("submit", "command", "-t", "all", "-p", "cmd=true",
                                       *SIMULATE, "--in", "1h")
    direct = deployment.direct("submit", "command", "-t", "all", "-p", "cmd=true", *SIMULATE,
                               "--in", "1h")
    assert (code, out, err) == direct and code == 5
    # And --wait follows the task to its end over the server's event stream
    code, out, err = deployment.remote("submit", "command", "-t", "group:web", "-p",
                                       "cmd=true", *SIMULATE, "--yes", "--wait")
    assert code == 0 and out.strip().isdigit(), err
    assert "5 of 5 succeeded" in err


def test_window_decisions_through_the_server_read_as_at_the_shell(
        deployment: Deployment) -> None:
    cli = deployment.api.cli
    for name in ("w-direct", "w-remote"):
        cli.ok("windows", "add", name, "--cron", "0 22 * * SAT", "--end-time", "02:00",
               "--requires-approval", operator="alice")
    said = {}
    for mode, name in (("direct", "w-direct"), ("remote", "w-remote")):
        run = deployment.direct if mode == "direct" else deployment.remote
        said[mode] = []
        for step in (["approve", "--comment", "ok", "--if-version", "1"], ["revoke"], ["deny"],
                     ["deny", "--comment", "quarter close"], ["approve", "--if-version", "9"],
                     ["approve", "-o", "json"]):
            code, out, err = run("windows", step[0], name, *step[1:])
            # each decision's time is its own ("at", and the minute "approval" names)
            said[mode].append((code, re.sub(r'"at": "[^"]+"|\d{4}-\d\d-\d\d \d\d:\d\d UTC', "",
                                            out.replace(name, "W")), err.replace(name, "W")))
    assert said["direct"] == said["remote"]
    assert [code for code, _out, _err in said["remote"]] == [0, 0, 2, 0, 2, 0]


def test_a_bad_token_is_refused_in_one_line_that_does_not_repeat_it(
        deployment: Deployment) -> None:
    bad = "fst_000000000000_" + "x" * 43
    code, out, err = deployment.remote("tasks", "list", token=bad)
    assert (code, out) == (1, "")
    assert bad not in err and bad[17:] not in err
    one_line(err)
    # And a revoked token is refused as well (a token of this test's: the others use theirs)
    token = deployment.api.token("revoked-cli", "--role", "admin", "--owner", "tester")
    assert deployment.remote("hosts", "list", token=token)[0] == 0
    [token_id] = [r.id for r in sql_rows(deployment.api.database_url,
                                         "SELECT id FROM api_tokens WHERE name = 'revoked-cli'")]
    deployment.api.cli.ok("tokens", "revoke", str(token_id))
    code, out, err = deployment.remote("hosts", "list", token=token)
    assert (code, out) == (1, "") and token not in err


def test_as_is_refused_in_remote_mode(deployment: Deployment) -> None:
    code, out, err = deployment.remote("--as", "mallory", "tasks", "pause",
                                       str(deployment.pending))
    assert (code, out) == (2, "")
    assert "--as" in one_line(err) and "token" in err
    deployment.settled()
    assert not events(deployment.api.database_url, deployment.pending, kinds=("pause",))


# What stays an administrator's at the deployment: the schema, the Redis copies and the queue's
# repair, the nodes and the notifications' own record.
@pytest.mark.parametrize("args", [
    ["db", "upgrade"], ["windows", "sync"], ["reconcile", "--dry-run"], ["redis", "status"],
    ["notify", "list"],
])
def test_a_command_that_needs_direct_mode_is_refused_and_never_runs_locally(
        deployment: Deployment, args: list[str]) -> None:
    before = deployment.mark()
    code, out, err = deployment.remote(*args)
    assert (code, out) == (2, "")
    line = one_line(err)
    assert f"fleetsched {args[0]} {args[1]}" in line or args[0] == "reconcile"
    assert "needs direct mode" in line and deployment.server in line
    assert deployment.mark() == before


def test_a_server_that_is_down_is_one_line_naming_the_url_without_credentials(
        tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env = isolated_env(tmp_path, FLEETSCHED_TOKEN="fst_000000000000_secretsecret")
    code, out, err = run_cli(["--server", url, "tasks", "list"], env=env)
    assert (code, out) == (1, "")
    assert url in one_line(err) and "secretsecret" not in err
    # And a URL holding credentials is refused before anything is sent, without repeating them
    code, out, err = run_cli(["--server", "https://bob:hunter2@fleet.example.org", "status"],
                             env=env)
    assert (code, out) == (2, "") and "hunter2" not in err and "token" in err


def test_the_server_and_token_come_from_the_settings_and_the_token_is_never_shown(
        deployment: Deployment, tmp_path: Path) -> None:
    # Given the server in the config file and the token in a file named there
    (tmp_path / "token").write_text(deployment.token + "\n")
    config = tmp_path / "fleetsched.toml"
    config.write_text(f'server = "{deployment.server}"\ntoken_file = "{tmp_path / "token"}"\n')
    env = isolated_env(tmp_path, FLEETSCHED_CONFIG=str(config))
    # Then a command goes through the server as with --server and $FLEETSCHED_TOKEN
    assert run_cli(["hosts", "list"], env=env)[:2] == deployment.direct("hosts", "list")[:2]
    # And `config show` masks the token given in the environment
    code, out, err = run_cli(["config", "show"],
                             env={**env, "FLEETSCHED_CONFIG": None,
                                  "FLEETSCHED_SERVER": deployment.server,
                                  "FLEETSCHED_TOKEN": deployment.token})
    assert code == 0 and deployment.token not in out + err
    assert re.search(r"^token\s+\*+", out, re.MULTILINE) and deployment.server in out
    # And both a token and a token file is a contradiction, refused in one line
    code, out, err = run_cli(["hosts", "list"], env={**env, "FLEETSCHED_TOKEN": "x"})
    assert (code, out) == (2, "") and "token_file" in one_line(err)


def test_the_root_help_lists_the_server_option() -> None:
    code, out, _err = run_cli(["--help"])
    assert code == 0 and "--server" in out


# The documented examples (tests/doc_examples.py) of the commands that only read (READING), and
# dry runs: run in both modes on this deployment, they print the same. The task, job and host
# they name are this deployment's (as tests/cli/test_documented_examples.py substitutes its own).


def test_the_documented_examples_of_reading_commands_print_the_same_in_remote_mode(
        deployment: Deployment) -> None:
    from tests.doc_examples import all_examples, command_path, segments

    deployment.settled()
    names = {"42": str(deployment.done), "43": str(deployment.pending), "12": "999",
             "42.7": f"{deployment.done}.1", "web-07": "web-03"}
    ran, differ = 0, []
    for example in all_examples():
        for run in segments(example.text):
            path = command_path(run.args)
            dry = path == ("submit",) and "--dry-run" in run.args and "-f" not in run.args
            if (path not in READING and not dry) or run.env or "--html" in run.args:
                continue
            if run.args[0].startswith("-"):  # global options (--as, --database-url ...)
                continue
            args = [names.get(a, a) for a in run.args]
            direct, remote = deployment.direct(*args), deployment.remote(*args)
            ran += 1
            shown = [(code, re.sub(r"seed \d+", "seed N", normalised(out)))
                     for code, out, _err in (direct, remote)]
            if shown[0] != shown[1]:
                differ.append(f"{example.source}: {example.text}\n  direct {direct}\n"
                              f"  remote {remote}")
    assert not differ, "\n".join(differ)
    assert ran >= 20  # the examples were found
