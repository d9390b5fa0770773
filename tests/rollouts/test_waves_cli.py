"""Waves from the command line, without workers: ``--dry-run`` lists the waves with their hosts,
a task file's ``waves:`` keys submit the same rollout as the options, a bad spec is one line
(exit code 2) and nothing is queued, and ``tasks show`` shows the waves of a queued task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from tests.submit_support import KEYS, Cli, cli_with_inventory, redis_snapshot, sql_snapshot


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> Cli:
    redis_client.flushall()
    return cli_with_inventory(tmp_path, redis_url, "[web]\nweb-[01:04]\n[db]\ndb-[01:02]\n")


def test_a_dry_run_lists_the_waves_with_their_hosts(cli: Cli) -> None:
    out = cli.ok("submit", "command", "-t", "all", "-p", "cmd=true", "--waves", "1,50%",
                 "--wave-order", "by-group", "--wave-gate", "approve", "--dry-run", "-o", "json")
    plan = json.loads(out)
    waves: dict[int, list[str]] = {}
    for job in plan["jobs"]:
        waves.setdefault(job["wave"], []).append(job["host"])
    # 6 hosts: 1, then 3 (50%), then the 2 left; by-group spreads db and web
    assert [len(waves[k]) for k in sorted(waves)] == [1, 3, 2]
    assert {h[:2] for h in waves[2]} == {"db", "we"}
    assert plan["plan"]["waves"].startswith("3: 1,50% in by-group order; between waves: "
                                            "operator approval")


@pytest.mark.parametrize("args, message", [
    (["--waves", "1,,2"], "--waves '1,,2' must be sizes separated by commas"),
    (["--waves", "0"], "--waves"),
    (["--waves", "1", "--wave-order", "alphabetical"], "--wave-order 'alphabetical' must be"),
    (["--wave-check", "true"], "--wave-check needs --waves"),
    (["--waves", "1", "--wave-seed", "7"], "--wave-seed applies to --wave-order random only"),
    (["--waves", "1", "--wave-order", "random", "--wave-seed", "-1"],
     "--wave-seed '-1' must be a number from 0 to 2147483647"),
    (["--wave-seed", "7"], "--wave-seed needs --waves"),
])
def test_a_bad_wave_option_is_one_line_and_nothing_is_queued(
        cli: Cli, redis_client: redis.Redis, args: list[str], message: str) -> None:
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    code, out, err = cli("submit", "command", "-t", "group:web", "-p", "cmd=true", *args, "--yes")
    assert code == 2, err
    assert err.startswith("error: ") and message in err.splitlines()[0], err
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before


def test_a_random_order_dry_run_names_its_seed_and_that_seed_submits_those_waves(
        cli: Cli, redis_client: redis.Redis) -> None:
    def waves_of(jobs: list[dict]) -> list[list[str]]:
        by_wave: dict[int, list[str]] = {}
        for job in jobs:
            by_wave.setdefault(job["wave"], []).append(job["host"])
        return [sorted(by_wave[k]) for k in sorted(by_wave)]

    args = ["submit", "command", "-t", "all", "-p", "cmd=true", "--waves", "1,2,100%",
            "--wave-order", "random"]
    # Given a dry run of a random order: it says which draw it shows
    code, out, err = cli(*args, "--dry-run", "-o", "json")
    assert code == 0, err
    seed = int(err.split("seed ", 1)[1].split(":", 1)[0])
    assert f"submit with --wave-seed {seed} to roll out exactly these" in err
    shown = waves_of(json.loads(out)["jobs"])
    # When the operator submits with that seed, the task's waves are the ones shown
    task = cli.submit(*args[1:], "--wave-seed", str(seed), "--yes")
    staged = json.loads(cli.ok("tasks", "show", str(task), "-o", "json"))
    assert staged["waves"]["order"] == "random"
    members = redis_client.zrange(KEYS.waves(str(task)), 0, -1, withscores=True)
    by_wave: dict[int, list[str]] = {}
    for member, wave in members:
        by_wave.setdefault(int(wave), []).append(member.split(" ", 1)[1])
    assert [sorted(by_wave[k]) for k in sorted(by_wave)] == shown


def test_a_task_file_with_waves_stages_the_later_waves_and_tasks_show_says_so(
        cli: Cli, tmp_path: Path, redis_client: redis.Redis) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("action: command\ntarget: group:web\nparams: {cmd: 'true'}\n"
                    "waves: 1,2\nwave_pause: 5m\nwave_check: systemctl is-active nginx\n")
    task = cli.submit("-f", str(path))
    # Wave 1 is due, waves 2 and 3 are staged out of every due set
    assert redis_client.zrange(KEYS.due("normal"), 0, -1) == [f"{task}.0"]
    assert redis_client.zcard(KEYS.waves(str(task))) == 4
    assert redis_client.hget(KEYS.job(f"{task}.3"), "state") == "waiting"
    shown = json.loads(cli.ok("tasks", "show", str(task), "-o", "json"))
    w = shown["waves"]
    assert (w["wave"], w["waves"], w["state"], w["sizes"]) == (1, 3, "running", "1,2")
    assert w["pause_ms"] == 300_000 and w["check"] == "systemctl is-active nginx"
    assert w["waits_for"] == "wave 1's jobs to end"
    # A task file key without waves: is refused with its line
    path.write_text("action: command\ntarget: group:web\nparams: {cmd: 'true'}\n"
                    "wave_gate: approve\n")
    code, _, err = cli("submit", "-f", str(path), "--yes")
    assert code == 2 and "task.yaml:4: wave_gate needs waves" in err, err


def test_the_task_file_of_the_waves_guide_parses() -> None:
    from scheduler.submission.taskfile import parse_task_text

    guide = (Path(__file__).resolve().parents[2] / "docs/guides/submitting-tasks.md").read_text()
    block = guide.split("# reload-in-waves.yaml\n", 1)[1].split("```", 1)[0]
    request = parse_task_text(block, "reload-in-waves.yaml")
    assert request.waves is not None
    assert (request.waves.order, request.waves.gate, request.waves.pause_s) == ("by-group",
                                                                                "approve", 300)
    assert request.waves.describe().startswith("1,10%,100% in by-group order")


def test_reconcile_after_redis_lost_everything_stages_the_later_waves_again(
        cli: Cli, redis_client: redis.Redis) -> None:
    from scheduler.queue.client import Queue
    from scheduler.record.engine import make_engine
    from scheduler.submission.reconcile import reconcile

    # Given a task in waves 1,2 of 4 hosts, submitted, and Redis then losing everything
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--waves", "1,2",
                      "--wave-gate", "approve")
    redis_client.flushall()
    # When reconcile rebuilds Redis from SQL
    engine = make_engine(cli.database_url)
    try:
        report = reconcile(engine, Queue(redis_client, KEYS), nodes_wait_ms=0, operator="ops")
    finally:
        engine.dispose()
    # Then only wave 1 is due again; waves 2 and 3 are staged behind the controller, as before
    assert report.jobs_requeued == 4
    assert redis_client.zrange(KEYS.due("normal"), 0, -1) == [f"{task}.0"]
    assert [redis_client.hget(KEYS.job(f"{task}.{n}"), "state") for n in range(1, 4)] == [
        "waiting"] * 3
    t = redis_client.hgetall(KEYS.task(str(task)))
    assert (t["wave"], t["waves"], t["wave_state"]) == ("1", "3", "running")
    assert '"gate":"approve"' in t["wave_policy"]
    assert redis_client.sismember(KEYS.waving, str(task))


def test_resume_of_a_rollout_stopped_by_its_check_is_refused_with_the_way_on(
        cli: Cli, redis_client: redis.Redis) -> None:
    from scheduler.queue.client import Queue
    from scheduler.queue.waves import move

    # Given a rollout whose wave check failed: the controller moved it checking -> stopped (the
    # task stays active: nothing is held, the next wave waits for the operator)
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--waves", "1,2",
                      "--wave-check", "false")
    queue = Queue(redis_client, KEYS)
    assert move(queue, str(task), 1, ["running"], "checking", "wave-check")
    assert move(queue, str(task), 1, ["checking"], "stopped", "wave-stop", why="web-01: failed")
    before = queue.task_state(str(task))
    assert (before["state"], before["wave_state"]) == ("active", "stopped")
    # When the operator asks to resume it
    code, out, err = cli("tasks", "resume", str(task))
    # Then it is refused as other refused changes are (exit 2), in one line with the way on,
    # and nothing changed
    assert code == 2, (out, err)
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and "rollout stopped at wave 1" in lines[0], err
    assert f"fleetsched tasks continue {task}" in err and f"fleetsched tasks cancel {task}" in err
    assert "resumed" not in out + err
    assert queue.task_state(str(task)) == before


def test_a_pause_between_waves_is_shown_as_a_time_not_epoch_milliseconds() -> None:
    from scheduler.submission.rollout import describe

    task = {"waves": "2", "wave": "1", "wave_state": "pausing", "wave_until": "1795845045899",
            "wave_policy": '{"pause_ms": 600000}'}
    assert describe(task)["waits_for"] == "the pause until 2026-11-28T05:50:45Z"
    assert describe({**task, "wave_until": ""})["waits_for"] == "the pause until ?"


def test_tasks_show_says_a_finished_task_and_a_cancelled_rollout_as_they_are(
        cli: Cli, redis_client: redis.Redis) -> None:
    from scheduler.queue.client import Queue
    from scheduler.queue.types import JobResult

    queue = Queue(redis_client, KEYS)
    # Given a one-host task whose job a worker took and acked (the hash's state stays active)
    done = cli.submit("command", "-t", "web-01", "-p", "cmd=true")
    [job] = queue.claim("w1", 10).jobs
    queue.ack("w1", [(job.job_id, job.token, JobResult(exit_code=0))])
    assert queue.task_state(str(done))["state"] == "active"
    # Then tasks show says succeeded on its live line too, never "state=active"
    live = [line for line in cli.ok("tasks", "show", str(done)).splitlines()
            if line.startswith("live")]
    assert live and "state=succeeded" in live[0], live
    # Given a rollout in waves (behind a gate), cancelled
    gated = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--waves", "1,100%",
                       "--wave-gate", "approve")
    cli.ok("tasks", "cancel", str(gated))
    # Then it waits for nobody: no "waiting for an operator", no stale reason
    shown = cli.ok("tasks", "show", str(gated))
    waves = [line for line in shown.splitlines() if line.startswith("waves")]
    assert waves and waves[0].endswith("cancelled") and "waiting" not in shown, shown
    rollout = json.loads(cli.ok("tasks", "show", str(gated), "-o", "json"))["waves"]
    assert (rollout["state"], rollout["waits_for"], rollout["why"]) == ("cancelled", None, None)
