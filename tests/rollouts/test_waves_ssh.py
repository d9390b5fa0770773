"""Rollouts in waves end to end, on 4 real sshd hosts with a real worker node (its recorder and
its wave controller): a failing health check stops the rollout after wave 1, a gate waits for
``tasks continue``, and a pause between waves survives the node being killed and replaced."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from scheduler.record.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.submit_support import Cli, inventory, sql_rows
from tests.worker_support import KEYS, WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd


class Rollout:
    """A CLI, an inventory of the fleet's hosts in group web, and worker nodes to start."""

    def __init__(self, tmp: Path, redis_url: str, fleet: SshFleet) -> None:
        self.tmp, self.redis_url, self.fleet = tmp, redis_url, fleet
        self.db = f"sqlite:///{tmp / 'fleetsched.db'}"
        upgrade(self.db)
        self.cli = Cli(tmp, redis_url, self.db)
        lines = [f"{h.name} ansible_host={h.address} ansible_port={h.port} "
                 f"ansible_user={current_user()}" for h in fleet]
        inventory(self.cli, tmp, "[web]\n" + "\n".join(lines) + "\n")
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.workers: list[WorkerProcess] = []

    def worker(self, name: str) -> WorkerProcess:
        env = {"FLEETSCHED_KNOWN_HOSTS": str(self.fleet.known_hosts),
               "FLEETSCHED_SSH_CONFIG": str(self.fleet.ssh_config),
               "FLEETSCHED_DATABASE_URL": self.db}
        args = [a for a in worker_args(name, slots=4, processes=1) if a != "--no-recorder"]
        w = WorkerProcess(self.redis_url, self.tmp, args, env=env).start()
        self.workers.append(w)
        return w

    def submit(self, *wave_args: str, cmd: str = "true") -> int:
        f = self.fleet
        return self.cli.submit("command", "-t", "group:web", "-p", f"cmd={cmd}",
                               "--executor", "ssh",
                               "--executor-option", f"identity_file={f.identity}",
                               "--executor-option", "allow_agent=false",
                               "--executor-option", "look_for_keys=false", *wave_args)

    def wave(self, task: int) -> tuple[str, str]:
        t = self.client.hgetall(KEYS.task(str(task)))
        return t.get("wave", ""), t.get("wave_state", "")

    def until_wave(self, task: int, wave: str, state: str, timeout: float = 60) -> None:
        wait_until(lambda: self.wave(task) == (wave, state), timeout,
                   f"task {task} at wave {wave} {state} (now {self.wave(task)})",
                   self.tails)

    def claimed_hosts(self, task: int) -> set[str]:
        return {r.host for r in sql_rows(self.db, "SELECT host FROM events WHERE task_id = :t "
                                                  "AND kind = 'claim'", t=str(task))}

    def tails(self) -> str:
        return "\n".join(w.tail() for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.client.close()


@pytest.fixture
def rollout(tmp_path: Path, redis_url: str, ssh_fleet: SshFleet) -> Iterator[Rollout]:
    r = Rollout(tmp_path, redis_url, ssh_fleet)
    try:
        yield r
    finally:
        r.close()


def test_a_failing_wave_check_stops_the_rollout_after_the_first_wave(rollout: Rollout) -> None:
    # Given a node serving the 4 hosts
    rollout.worker("node-1")
    # When a change goes out in waves 1,1,100% with a health check that fails
    task = rollout.submit("--waves", "1,1,100%", "--wave-check", "false")
    # Then the rollout stops after wave 1, and tasks wait says so with exit code 3
    code, _, err = rollout.cli("tasks", "wait", str(task), "--timeout", "60s")
    assert code == 3, err + rollout.tails()
    assert "stopped" in err
    assert rollout.wave(task) == ("1", "stopped")
    # Wave 1 ran on one host; the 3 others never ran (from the SQL events)
    wait_until(lambda: sql_rows(rollout.db, "SELECT id FROM events WHERE task_id = :t AND "
                                            "kind = 'wave-stop'", t=str(task)), 30, "the record")
    assert len(rollout.claimed_hosts(task)) == 1
    [(job_state, n)] = sql_rows(rollout.db, "SELECT state, count(*) FROM jobs WHERE task_id = "
                                            ":t AND state = 'pending' GROUP BY state", t=task)
    assert n == 3
    # And tasks show says why, naming the host and the check
    shown = json.loads(rollout.cli.ok("tasks", "show", str(task), "-o", "json"))
    assert shown["state"] == "stopped"
    w = shown["waves"]
    assert (w["wave"], w["waves"], w["state"]) == (1, 3, "stopped")
    [host] = rollout.claimed_hosts(task)
    assert "check `false` failed on 1 of 1 hosts" in w["why"] and host in w["why"]
    [row] = sql_rows(rollout.db, "SELECT wave, wave_state, wave_why FROM tasks WHERE id = :t",
                     t=task)
    assert (row.wave, row.wave_state, row.wave_why) == (1, "stopped", w["why"])
    table = rollout.cli.ok("tasks", "show", str(task))
    assert "wave 1 of 3" in table and "stopped" in table
    assert "waves=1,1,100% (3 waves, inventory order, check `false`)" in table  # what ran
    assert "waves=1,1,100% (3 waves" in rollout.cli.ok("report", "--task", str(task))
    [listed] = [r for r in json.loads(rollout.cli.ok("tasks", "list", "-o", "json"))
                if r["id"] == task]
    assert (listed["state"], listed["wave"]) == ("stopped", "1/3 stopped")
    assert [r["id"] for r in json.loads(rollout.cli.ok("tasks", "list", "--state", "stopped",
                                                       "-o", "json"))] == [task]
    assert task not in [r["id"] for r in json.loads(rollout.cli.ok(
        "tasks", "list", "--state", "active", "-o", "json"))]
    code, _, err = rollout.cli("tasks", "list", "--state", "stoped")
    assert code == 2 and err.startswith("error: --state 'stoped' must be one of accepted, "), err
    # And tasks watch ends at once (the rollout waits for the operator), with its wave line
    code, _, err = rollout.cli("tasks", "watch", str(task), "--timeout", "10s")
    assert code == 3, err
    assert f"task {task} wave 1/3 stopped: wave 1 check `false` failed" in err, err
    # And the operator can cancel it: the staged waves are cancelled too
    rollout.cli.ok("tasks", "cancel", str(task))
    counts = dict(sql_rows(rollout.db, "SELECT state, count(*) FROM jobs WHERE task_id = :t "
                                       "GROUP BY state", t=task))
    assert counts == {"succeeded": 1, "cancelled": 3}


def test_a_gate_waits_for_an_operator_to_continue(rollout: Rollout) -> None:
    rollout.worker("node-1")
    # When a change goes out in waves 1,100% behind an approval gate
    task = rollout.submit("--waves", "1,100%", "--wave-gate", "approve")
    rollout.until_wave(task, "1", "gated")
    # (Redis says "gated" as the first wave's job ends; its claim reaches SQL through the
    # recorder, possibly a moment later)
    wait_until(lambda: rollout.claimed_hosts(task), 30, "wave 1's claim in SQL", rollout.tails)
    assert len(rollout.claimed_hosts(task)) == 1
    # Then continuing something that is not gated is refused...
    code, _, err = rollout.cli("tasks", "continue", str(task + 1000))
    assert code == 4, err
    # ...and alice's continue lets the rest run
    rollout.cli.ok("tasks", "continue", str(task), operator="alice")
    code, _, err = rollout.cli("tasks", "wait", str(task), "--timeout", "60s")
    assert code == 0, err + rollout.tails()
    wait_until(lambda: len(rollout.claimed_hosts(task)) == 4, 30, "4 claims in SQL",
               rollout.tails)
    [ev] = sql_rows(rollout.db, "SELECT operator, data FROM events WHERE task_id = :t AND "
                                "kind = 'continue'", t=str(task))  # recorded by the command
    assert ev.operator == "alice"
    code, _, err = rollout.cli("tasks", "continue", str(task))
    assert code == 2 and "no gate or stop to pass" in err, err


def test_a_pause_between_waves_survives_the_node_being_killed(rollout: Rollout) -> None:
    # Given a rollout in waves 1,100% with a 3 s pause
    first = rollout.worker("node-1")
    task = rollout.submit("--waves", "1,100%", "--wave-pause", "3s")
    rollout.until_wave(task, "1", "pausing")
    # When the node is killed during the pause, and another starts
    first.kill9()
    assert rollout.wave(task) == ("1", "pausing")
    rollout.worker("node-2")
    # Then the rollout goes on from Redis: wave 2 runs, every host succeeds
    code, _, err = rollout.cli("tasks", "wait", str(task), "--timeout", "60s")
    assert code == 0, err + rollout.tails()
    wait_until(lambda: len(rollout.claimed_hosts(task)) == 4, 30, "4 claims in SQL",
               rollout.tails)
    wait_until(lambda: rollout.wave(task) == ("2", "done"), 15, "the last wave to be done")


def test_a_failing_change_with_retries_stops_inside_its_first_wave(rollout: Rollout) -> None:
    # Given a node serving the 4 hosts
    rollout.worker("node-1")
    # When a failing change goes out in waves of 3 and 1, one host at a time, with retries and
    # --max-failures 30% (1 host of the first wave; 2 of the task's 4)
    task = rollout.submit("--waves", "3,100%", "--max-failures", "30%", "--max-concurrency", "1",
                          "--retries", "2", cmd="false")
    # Then the rollout stops when the first host fails its first attempt: tasks wait says so
    code, _, err = rollout.cli("tasks", "wait", str(task), "--timeout", "60s")
    assert code == 3, err + rollout.tails()
    assert "stopped" in err
    # Only that host ran (the SQL events); the wave's 2 other hosts and its retry were held
    wait_until(lambda: sql_rows(rollout.db, "SELECT id FROM events WHERE task_id = :t AND "
                                            "kind = 'pause'", t=str(task)), 30, "the record")
    [host] = rollout.claimed_hosts(task)
    [pause] = sql_rows(rollout.db, "SELECT operator FROM events WHERE task_id = :t AND "
                                   "kind = 'pause'", t=str(task))
    assert pause.operator == "rollout"
    shown = json.loads(rollout.cli.ok("tasks", "show", str(task), "-o", "json"))
    assert (shown["state"], shown["waves"]["state"]) == ("stopped", "stopped")
    assert shown["waves"]["why"].startswith(f"wave 1: 1 of 3 hosts failed an attempt ({host}), "
                                            "the limit is 1")
    # When the operator continues, the held jobs run: they fail too, and the task aborts at its
    # own limit (2 hosts) before the second wave is released
    rollout.cli.ok("tasks", "continue", str(task), operator="alice")
    code, _, err = rollout.cli("tasks", "wait", str(task), "--timeout", "60s")
    assert code == 3, err + rollout.tails()
    wait_until(lambda: rollout.client.hget(KEYS.task(str(task)), "state") == "aborted", 30,
               "the abort", rollout.tails)
    web04 = rollout.fleet.hosts[-1].name
    assert web04 not in rollout.claimed_hosts(task)


def test_waves_in_windows_start_each_host_in_its_window_and_wait_for_the_previous_wave(
        rollout: Rollout) -> None:
    # Given hosts web-01 and web-03, web-04 in a window open now, and web-02 in one that opens
    # in 6 seconds
    now = datetime.now(timezone.utc).replace(microsecond=0)
    later = now + timedelta(seconds=6)
    names = [h.name for h in rollout.fleet.hosts]
    for name, start in (("open-now", now - timedelta(minutes=1)), ("opens-soon", later)):
        rollout.cli.ok("windows", "add", name, "--start", start.isoformat(),
                       "--end", (now + timedelta(minutes=30)).isoformat())
    rollout.cli.ok("windows", "assign", "open-now", "--host", names[0], "--host", names[2],
                   "--host", names[3])
    rollout.cli.ok("windows", "assign", "opens-soon", "--host", names[1])
    rollout.worker("node-1")
    # When a change goes out in windows, in waves of 2 (web-01, web-02) and 2 (web-03, web-04)
    task = rollout.submit("--waves", "2,100%", "--in-window")
    code, _, err = rollout.cli("tasks", "wait", str(task), "--timeout", "90s")
    assert code == 0, err + rollout.tails()
    # Then (from the SQL events) web-02 started in its window, and wave 2 started only after
    # both hosts of wave 1 had finished, though its hosts' window was open all along
    wait_until(lambda: len(rollout.claimed_hosts(task)) == 4, 30, "4 claims in SQL",
               rollout.tails)
    rows = sql_rows(rollout.db, "SELECT host, kind, ts FROM events WHERE task_id = :t AND "
                                "kind IN ('claim', 'ack')", t=str(task))
    at = {(r.host, r.kind): _aware(r.ts) for r in rows}
    assert at[(names[1], "claim")] >= later
    wave1_done = max(at[(names[0], "ack")], at[(names[1], "ack")])
    assert min(at[(names[2], "claim")], at[(names[3], "claim")]) >= wave1_done


def _aware(value: object) -> datetime:
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
