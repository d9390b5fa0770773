"""Rollouts in waves end to end, on 4 real sshd hosts with a real worker node (its recorder and
its wave controller): a failing health check stops the rollout after wave 1, a gate waits for
``tasks continue``, and a pause between waves survives the node being killed and replaced."""

from __future__ import annotations

import json
from collections.abc import Iterator
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
    [listed] = [r for r in json.loads(rollout.cli.ok("tasks", "list", "-o", "json"))
                if r["id"] == task]
    assert listed["wave"] == "1/3 stopped"
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
