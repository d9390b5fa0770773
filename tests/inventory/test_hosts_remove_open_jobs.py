"""``hosts remove`` of a host whose jobs have not ended warns, naming how many and their tasks:
each of them would fail at its claim (the host is unknown). A real Redis and SQLite record."""

from __future__ import annotations

from pathlib import Path

from tests.submit_support import cli_with_inventory


def test_removing_a_host_with_queued_jobs_warns_with_their_count_and_tasks(
        tmp_path: Path, redis_url: str) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\nweb-02\n[db]\ndb-01\n")
    # Given two tasks with a job queued on web-01 (an hour from now), and one on db-01 only
    first = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h")
    second = cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--in", "1h")
    cli.submit("command", "-t", "db-01", "-p", "cmd=true", "--in", "1h")
    # When web-01 is removed: it is, with a warning naming its two jobs and their tasks
    code, _out, err = cli("hosts", "remove", "web-01")
    assert code == 0 and "removed host web-01" in err, err
    assert (f"warning: web-01 had 2 job(s) not ended yet (task(s) {first}, {second}): each "
            "fails at its claim") in err, err
    # And a host with no open job is removed without one
    cli.ok("hosts", "add", "spare-01")
    code, _out, err = cli("hosts", "remove", "spare-01")
    assert code == 0 and "warning" not in err, err
