"""``tasks watch`` names the hosts running now and the failed hosts' last lines, under the task's
bar, on real sshd hosts run by a real worker node (its recorder writes the SQLite record), in
direct mode and through a real ``fleetsched server`` (an admin, and two customers who each see
their own host only).

One task on three hosts: web-01 prints four lines and exits 3, web-02 blocks until a release
file exists, web-03 is killed by SIGKILL. While web-02 blocks, a watch that gives up (its last
frame, in a pipe) shows web-02 running on the node and for how long, and the two failures, each
with its exit code or signal and its last three lines; once released, the last frame and the
JSON summary say the same of the failures, and nothing runs any more."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len

from scheduler.record.migrate import upgrade
from tests.cli_support import isolated_env, run_cli
from tests.fleet import SshFleet, current_user
from tests.server.conftest import Api, server_process
from tests.submit_support import Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd

# web-01 fails with exit 3 after four lines (the last one on stderr); web-02 waits for the
# release file; web-03 kills its own shell.
SCRIPT = ("if [ {host.name} = web-01 ]; then echo one; echo two; echo three; echo four >&2; "
          "exit 3; fi; if [ {host.name} = web-03 ]; then kill -9 $$; fi; "
          "while [ ! -e %s ]; do sleep 0.1; done; echo released")


class Watched:
    """The fleet's first three hosts (web-01 of customer acme, web-02 of globex), a node that
    runs them, the task above on them, and a server on the same deployment."""

    def __init__(self, tmp: Path, redis_url: str, fleet: SshFleet) -> None:
        self.tmp, self.redis_url = tmp, redis_url
        self.db = f"sqlite:///{tmp / 'fleetsched.db'}"
        upgrade(self.db)
        self.cli = Cli(tmp, redis_url, self.db)
        tenants = {"web-01": " fleetsched_tenant=acme", "web-02": " fleetsched_tenant=globex"}
        hosts = list(fleet)[:3]
        inventory(self.cli, tmp, "[web]\n" + "\n".join(
            f"{h.name} ansible_host={h.address} ansible_port={h.port} "
            f"ansible_user={current_user()}{tenants.get(h.name, '')}" for h in hosts) + "\n")
        env = {"FLEETSCHED_KNOWN_HOSTS": str(fleet.known_hosts),
               "FLEETSCHED_SSH_CONFIG": str(fleet.ssh_config), "FLEETSCHED_DATABASE_URL": self.db}
        args = [a for a in worker_args("node-1", slots=4, processes=1) if a != "--no-recorder"]
        self.node = WorkerProcess(redis_url, tmp, args, env=env).start()
        self.release = tmp / "release"
        self.task = self.cli.submit(
            "shell", "-t", "web-01,web-02,web-03", "-p", f"cmd={SCRIPT % self.release}",
            "--retries", "0", "--executor", "ssh",
            "--executor-option", f"identity_file={fleet.identity}",
            "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false")

    def once(self) -> dict:
        code, out, err = self.cli("tasks", "watch", str(self.task), "--once", "-o", "json")
        assert code == 0, err
        [row] = json.loads(out)
        return row

    def blocked(self) -> None:
        """Wait until web-02 runs (its worker has said since when) and the record has the two
        failures."""
        def ready() -> bool:
            running = self.once()["running_hosts"]
            failed = sql_rows(self.db, "SELECT host FROM events WHERE task_id = :t AND kind = "
                                       "'fail'", t=str(self.task))
            return (len(failed) == 2 and [r["host"] for r in running] == ["web-02"]
                    and running[0]["for_s"] is not None)
        wait_until(ready, 60, "web-02 running and two failures recorded", self.node.tail)


@pytest.fixture
def watched(tmp_path: Path, redis_url: str, ssh_fleet: SshFleet) -> Iterator[Watched]:
    w = Watched(tmp_path, redis_url, ssh_fleet)
    try:
        yield w
    finally:
        w.release.touch()
        w.node.stop()


def _lines(err: str) -> list[str]:
    return [ln.rstrip() for ln in err.splitlines()]


def assert_failures_shown(err: str, task: int, *, output: bool = True) -> None:
    """The two failed hosts, each with its exit code or signal and (``output``) its last three
    lines, web-01's fourth from last not among them."""
    lines = _lines(err)
    [web01] = [ln for ln in lines if f"fail {task}.0 on web-01" in ln]
    assert web01.strip().startswith("fail") and " exit 3" in web01, err
    if output:
        assert [ln.strip() for ln in lines if ln.strip().startswith("web-01: ")] == \
            ["web-01: two", "web-01: three", "web-01: [stderr] four"], err
        [web03] = [ln for ln in lines if f"fail {task}.2 on web-03" in ln]
        assert " SIGKILL" in web03, err
    else:
        assert not [ln for ln in lines if ln.strip().startswith("web-01: ")], err
    assert "{'" not in err and "[{" not in err  # no Python reprs


def test_watch_shows_the_host_running_now_and_the_failed_hosts_last_lines(
        watched: Watched) -> None:
    task = watched.task
    watched.blocked()
    # The JSON of one read: web-02 running on node-1, for a while already
    row = watched.once()
    [running] = row["running_hosts"]
    assert (running["host"], running["job"], running["worker"]) == ("web-02", f"{task}.1",
                                                                    "node-1")
    assert row["running"] == 1 and row["failed"] == 2
    # When a watch gives up while web-02 blocks, its last frame (a pipe: the last frame only)
    code, _out, err = watched.cli("tasks", "watch", str(task), "--timeout", "1.5s",
                                  "--interval", "0.2")
    assert code == 1 and f"error: task {task} not finished after 1.5s" in err, err
    # Then under the bar: web-02 running on node-1 and for how long, and the two failures
    [line] = [ln for ln in _lines(err) if ln.strip().startswith("running web-02")]
    assert re.fullmatch(r"  running web-02 on node-1, \d+(\.\d)?s", line), err
    assert_failures_shown(err, task)
    # And at 80 columns every line fits (cut, never wrapped), the hosts still named
    narrow = Cli(watched.tmp, watched.redis_url, watched.db, env={"COLUMNS": "80"})
    code, _out, err = narrow("tasks", "watch", str(task), "--timeout", "1s", "--interval", "0.2")
    assert code == 1
    assert all(cell_len(ln) <= 80 for ln in _lines(err)), err
    assert any(ln.strip().startswith("running web-02 on node-1") for ln in _lines(err)), err
    assert_failures_shown(err, task)
    # When web-02 is released, the watch ends with the task: exit 3 (jobs failed)
    watched.release.touch()
    code, out, err = watched.cli("tasks", "watch", str(task), "--timeout", "60s",
                                 "--interval", "0.2", "-o", "json")
    assert code == 3, err + watched.node.tail()
    # Then its last frame lists the failures, and nothing runs any more
    assert_failures_shown(err, task)
    assert not [ln for ln in _lines(err) if ln.strip().startswith("running ")], err
    [row] = json.loads(out)
    assert row["running_hosts"] == [] and row["succeeded"] == 1 and row["failed"] == 2
    by_host = {f["host"]: f for f in row["failures"]}
    assert {h: (f["job"], f["kind"], f["exit"]) for h, f in by_host.items()} == {
        "web-01": (f"{task}.0", "fail", "3"), "web-03": (f"{task}.2", "fail", "SIGKILL")}
    assert by_host["web-01"]["last_lines"] == ["two", "three", "[stderr] four"]


def test_remote_watch_shows_the_same_and_a_customer_its_own_host_only(
        watched: Watched) -> None:
    task = watched.task
    watched.blocked()
    with server_process(watched.tmp, watched.redis_url, watched.db) as (base, _proc):
        api = Api(base, watched.cli, watched.db)
        server = base.removesuffix("/api/v1")

        def remote(token: str, *args: str) -> tuple[int, str, str]:
            env = isolated_env(watched.tmp / "remote", FLEETSCHED_TOKEN=token)
            return run_cli(["--server", server, *args], env=env)

        admin = api.token_named("admin", "--role", "admin", "--owner", "tester")
        acme = api.token_named("acme", "--role", "customer-viewer", "--tenant", "acme")
        globex = api.token_named("globex", "--role", "customer-viewer", "--tenant", "globex")
        watch = ("tasks", "watch", str(task), "--timeout", "2s", "--interval", "0.2")
        # An admin's watch through the server: the frame direct mode draws
        code, _out, err = remote(admin, *watch)
        assert code == 1, err
        assert any(re.fullmatch(r"  running web-02 on node-1, \d+(\.\d)?s", ln)
                   for ln in _lines(err)), err
        assert_failures_shown(err, task)
        [row] = json.loads(remote(admin, "tasks", "watch", str(task), "--once", "-o", "json")[1])
        assert [(r["host"], r["worker"]) for r in row["running_hosts"]] == [("web-02", "node-1")]
        # globex's customer: its host running, not the team's node; acme's failure not shown
        code, _out, err = remote(globex, *watch)
        assert code == 1, err
        assert any(re.fullmatch(r"  running web-02, \d+(\.\d)?s", ln) for ln in _lines(err)), err
        assert "node-1" not in err and "web-01" not in err and "web-03" not in err, err
        # acme's customer: its one job has ended (failed): its watch ends at once, exit 3,
        # with its failure, the output withheld (the task does not say customer_output), and
        # nothing of web-02 or web-03
        code, _out, err = remote(acme, *watch)
        assert code == 3, err
        assert "web-02" not in err and "web-03" not in err and "node-1" not in err, err
        assert not [ln for ln in _lines(err) if ln.strip().startswith("running")], err
        assert_failures_shown(err, task, output=False)
        [row] = json.loads(remote(acme, "tasks", "watch", str(task), "--once", "-o", "json")[1])
        assert row["running_hosts"] == [] and row["total"] == 1
        # Once released, the admin's watch ends with the task, exit 3, its failures listed
        watched.release.touch()
        code, out, err = remote(admin, "tasks", "watch", str(task), "--timeout", "60s",
                                "--interval", "0.2", "-o", "json")
        assert code == 3, err
        assert_failures_shown(err, task)
        [row] = json.loads(out)
        assert {f["host"]: f["exit"] for f in row["failures"]} == {"web-01": "3",
                                                                   "web-03": "SIGKILL"}
