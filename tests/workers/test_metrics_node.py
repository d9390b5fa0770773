"""A worker node's Prometheus endpoint counts what the node ran, the same numbers ``tasks
show`` prints: a real ``fleetsched worker --metrics-port`` on the test redis-server, jobs that
succeed (simulate), fail after a retry (local ``false``) and cannot reach their host (ssh to a
closed port), scraped over HTTP and parsed with prometheus_client's own parser."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import free_port
from tests.submit_support import KEYS, Cli, cli_with_inventory, drain
from tests.worker_support import WorkerProcess, dump, wait_until, worker_args


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the endpoint: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def shown(cli: Cli, task: int) -> dict:
    code, out, err = cli("tasks", "show", str(task), "--output", "json")
    assert code in (0, 3), err
    return json.loads(out)


def closed_port() -> int:
    port = free_port()
    with socket.socket() as s:  # nothing listens there once this closes
        s.bind(("127.0.0.1", port))
    return port


def test_the_node_endpoint_counts_what_ran_as_tasks_show_does(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    # Given five hosts and one whose SSH port is closed
    cli = cli_with_inventory(tmp_path, redis_url, "[fleet]\nn-[00:04]\n[shut]\nshut-01 "
                             f"ansible_host=127.0.0.1 ansible_port={closed_port()}\n")
    port = free_port()
    w = WorkerProcess(redis_url, tmp_path / "w", worker_args(
        "node-m", slots=4, extra=["--metrics-port", str(port)]),
        env={"FLEETSCHED_DATABASE_URL": cli.database_url}).start()
    try:
        w.wait_registered(redis_client)
        # Before any job: every outcome series is there, at 0; the slots are the node's
        before = scrape(port)
        assert before[("fleetsched_jobs_finished_total", (("outcome", "succeeded"),))] == 0
        assert before[("fleetsched_slots", ())] == 4
        assert before[("fleetsched_slots_busy", ())] == 0

        # When three tasks run: 5 jobs succeed, 2 fail twice (one retry each), 1 cannot connect
        ok = cli.submit("command", "-t", "group:fleet", "-p", "cmd=true", "--executor", "simulate")
        bad = cli.submit("command", "-t", "n-00,n-01", "-p", "cmd=false", "--executor", "local",
                         "--retries", "1", "--backoff", "0s")
        ssh = cli.submit("command", "-t", "group:shut", "-p", "cmd=true", "--executor", "ssh",
                         "--retries", "0")

        def ended() -> bool:
            return sum(int(redis_client.hget(KEYS.task(str(t)), "succeeded") or 0)
                       + int(redis_client.hget(KEYS.task(str(t)), "failed") or 0)
                       for t in (ok, bad, ssh)) == 8
        wait_until(ended, 30, "the 8 jobs to end", lambda: w.tail() + dump(redis_client), [w])
        drain(redis_client, cli.database_url)
        wait_until(lambda: scrape(port)[("fleetsched_jobs_finished_total",
                                         (("outcome", "failed"),))] == 3,
                   10, "the finisher to count the last failure")
        after = scrape(port)
    finally:
        w.stop()

    # Then the counters say what tasks show says
    a, b, c = shown(cli, ok), shown(cli, bad), shown(cli, ssh)
    finished = {o: after[("fleetsched_jobs_finished_total", (("outcome", o),))]
                for o in ("succeeded", "failed", "retried", "lost")}
    assert finished == {"succeeded": a["succeeded"] + b["succeeded"] + c["succeeded"],
                        "failed": a["failed"] + b["failed"] + c["failed"],
                        "retried": 2, "lost": 0}, after
    assert (finished["succeeded"], finished["failed"]) == (5, 3)
    # 5 + 2 x 2 + 1 attempts claimed and run; each one observed once in the histograms
    assert after[("fleetsched_jobs_claimed_total", ())] == 10
    assert after[("fleetsched_job_duration_seconds_count", ())] == 10
    assert after[("fleetsched_job_queue_wait_seconds_count", ())] == 10
    assert after[("fleetsched_claim_latency_seconds_count", ())] >= 1
    assert after[("fleetsched_ssh_errors_total", (("reason", "unreachable"),))] == 1
    assert after[("fleetsched_ssh_errors_total", (("reason", "auth"),))] == 0
    assert after[("fleetsched_slots_busy", ())] == 0
    # No label names a host or a task
    labels = {k for _name, pairs in after for k, _v in pairs}
    assert labels <= {"outcome", "reason", "le"}, labels


def test_a_metrics_port_already_taken_stops_the_worker_with_one_line(
        tmp_path: Path, redis_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        w = WorkerProcess(redis_url, tmp_path, worker_args(
            "node-t", extra=["--metrics-port", str(port)])).start()
        rc = w.wait(30)
    errors = [line for line in w.log.read_text().splitlines() if line.startswith("error:")]
    assert rc == 2, w.tail()
    assert len(errors) == 1 and f"cannot serve metrics on 127.0.0.1:{port}" in errors[0]
    assert "Traceback" not in w.log.read_text()
