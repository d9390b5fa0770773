"""Configuration errors fail a job for good at its first attempt: a worker does not retry what
only an operator can fix (a ProxyCommand the ssh executor refuses, a missing identity file, bad
parameters), and the job's error names the problem once. Real worker processes on a real Redis;
the identity-file case connects to a real sshd (its host key is checked before the keys)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from scheduler.queue.client import Queue
from tests.fleet import SshFleet, current_user
from tests.worker_support import (
    KEYS,
    WorkerProcess,
    dump,
    events,
    submit,
    wait_until,
    worker_args,
)


def run_until_failed(client: redis.Redis, redis_url: str, tmp_path: Path, job: str,
                     env: dict[str, str]) -> dict[str, str]:
    """Serve the queue with one worker until ``job`` is dead-lettered; its job hash."""
    w = WorkerProcess(redis_url, tmp_path, worker_args("node-cfg", slots=2, processes=1),
                      env=env).start()
    q = Queue(client, KEYS)
    try:
        wait_until(lambda: q.job_state(job).get("state") == "failed", 20, f"{job} failed",
                   lambda: w.tail() + dump(client), [w])
    finally:
        w.stop()
    return q.job_state(job)


def attempts_of(client: redis.Redis, job: str) -> tuple[int, int, list[str]]:
    """(claims, retries, fail errors) the stream records for ``job``."""
    mine = [e for e in events(client) if e.get("job") == job]
    return (sum(e["kind"] == "claim" for e in mine), sum(e["kind"] == "retry" for e in mine),
            [e["error"] for e in mine if e["kind"] == "fail"])


def test_a_proxycommand_refused_by_the_ssh_executor_fails_for_good_on_the_first_attempt(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path,
) -> None:
    # Given an ssh config routing the host through a proxy command, and three attempts allowed
    config = tmp_path / "ssh_config"
    config.write_text("Host web-jump\n    ProxyCommand nc bastion.example 22\n")
    [job] = submit(redis_client, "41", ["web-jump"], executor="ssh",
                   options={"allow_agent": False, "look_for_keys": False},
                   max_attempts=3, backoff_ms=50)
    # When a worker runs it
    state = run_until_failed(redis_client, redis_url, tmp_path, job, {
        "FLEETSCHED_SSH_CONFIG": str(config),
        "FLEETSCHED_KNOWN_HOSTS": str(tmp_path / "known_hosts")})
    # Then it failed at once: one claim, no retry, the refusal as the error
    claims, retries, errors = attempts_of(redis_client, job)
    assert (claims, retries) == (1, 0)
    assert state["attempt"] == "1"
    assert len(errors) == 1 and errors[0].startswith("ConfigError: ssh config ")
    assert "sets proxycommand nc bastion.example 22 for web-jump" in errors[0]


def test_bad_parameters_fail_for_good_and_the_error_names_the_action_once(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path,
) -> None:
    # Given a task whose spec holds a parameter the action does not know
    [job] = submit(redis_client, "42", 1, params={"cmd": ["true"], "colour": "blue"},
                   max_attempts=3, backoff_ms=50)
    # When a worker runs it
    state = run_until_failed(redis_client, redis_url, tmp_path, job, {})
    # Then it failed at once, and the message says "action command" once, without a prefix
    claims, retries, errors = attempts_of(redis_client, job)
    assert (claims, retries) == (1, 0)
    assert errors == [state["error"]]
    assert errors[0].startswith("action command: unknown parameter 'colour'")
    assert errors[0].count("action command") == 1 and "parameters of" not in errors[0]


@pytest.mark.sshd
def test_a_missing_identity_file_fails_for_good_on_the_first_attempt(
    redis_client: redis.Redis, redis_url: str, ssh_fleet: SshFleet, tmp_path: Path,
) -> None:
    # Given a real sshd host, known to the worker, and an identity file that does not exist
    host = ssh_fleet.hosts[0]
    [job] = submit(redis_client, "43", [host.name], executor="ssh",
                   options=ssh_fleet.ssh_options(identity_file=str(tmp_path / "no-such-key")),
                   host_data={"address": host.address, "port": host.port,
                              "user": current_user()},
                   max_attempts=3, backoff_ms=50)
    # When a worker runs it
    run_until_failed(redis_client, redis_url, tmp_path, job, {
        "FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
        "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config)})
    # Then it failed at once, naming the file
    claims, retries, errors = attempts_of(redis_client, job)
    assert (claims, retries) == (1, 0)
    assert errors == [f"ConfigError: identity file {tmp_path / 'no-such-key'} does not exist"]
