"""A node killed with SIGKILL is not shown alive for two leases: once it missed three heartbeats
it is counted ``silent`` by ``top`` and ``status`` (its slots no longer counted busy), though
its presence stays until it is stale. A real worker node on a real Redis; the views through
the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import redis

from tests.submit_support import cli_with_inventory
from tests.worker_support import started_workers, wait_until


def test_a_killed_node_is_silent_after_three_missed_beats_long_before_its_lease_runs_out(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\n")
    # Given a node beating every 0.5 s with a 60 s lease (stale only after 120 s)
    with started_workers(redis_url, tmp_path / "nodes") as start:
        node = start("node-a", slots=3, processes=1, lease="60s",
                     env={"FLEETSCHED_HEARTBEAT_MS": "500"})
        node.wait_registered(redis_client)

        def workers() -> dict[str, object]:
            return json.loads(cli.ok("top", "--once", "-o", "json"))["workers"][0]

        wait_until(lambda: not workers()["silent"], 10, "a beat", node.tail, [node])
        assert "workers 1 alive, 0/3 slots busy" in cli.ok("top", "--once")
        # When it is killed with SIGKILL
        node.kill9()
        killed = time.monotonic()
        # Then within a few beats it is silent, not alive, and its slots are not counted
        wait_until(lambda: workers()["silent"], 20, "the node to be silent")
        assert time.monotonic() - killed < 60, "silent only when its lease ran out"
        row = workers()
        assert row["stale"] is False and row["worker"] == "node-a"
        top = cli.ok("top", "--once")
        assert "workers 0 alive, 1 silent (killed or stuck?" in top and "0/0 slots busy" in top
        assert "s ago, silent" in top
        _code, out, _err = cli("status", "-o", "json")
        [finding] = [f for f in json.loads(out)["checks"] if f["check"] == "workers"]
        assert (finding["data"]["alive"], finding["data"]["silent"]) == (0, 1), finding
