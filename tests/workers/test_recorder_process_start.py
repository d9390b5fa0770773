"""A node's recorder process that finds Redis unreachable as it starts waits for it, as the
recorder waits out an outage later, instead of exiting (which stops the whole node).

Found when a shard master of a Redis Cluster was killed while a node's recorder process was
still starting: its first connect met the dead master and the node stopped ("the recorder
process exited with status 1") although its master rode the failover out.
"""

from __future__ import annotations

import threading
from pathlib import Path

from scheduler.config import Settings
from tests.servers import RedisServer, free_port, redis_server_binary
from workers.recorder_process import _connect_when_reachable


def test_the_recorder_connects_once_redis_answers_and_gives_up_only_when_the_master_stops(
        tmp_path: Path) -> None:
    # Given settings for a Redis that is not there yet
    port = free_port()
    settings = Settings(redis_url=f"redis://127.0.0.1:{port}/0")
    stop = threading.Event()
    got: list[object] = []
    waiting = threading.Thread(target=lambda: got.append(
        _connect_when_reachable(settings, stop)), daemon=True)
    # When the recorder starts, and the server only a moment later
    waiting.start()
    waiting.join(1.0)
    assert waiting.is_alive() and not got  # still waiting, not exited
    binary = redis_server_binary()
    assert binary is not None
    (tmp_path / "redis").mkdir()
    server = RedisServer(binary=binary, dir=tmp_path / "redis", port=port)
    server.start()
    try:
        # Then it connects (within its backoff) and has a client that answers
        waiting.join(15)
        assert len(got) == 1 and got[0] is not None
        assert got[0].ping()  # type: ignore[attr-defined]
        got[0].close()  # type: ignore[attr-defined]
    finally:
        server.kill()
    # And with Redis gone for good, it returns nothing once the master stops it
    stop_now = threading.Event()
    late: list[object] = []
    gone = threading.Thread(target=lambda: late.append(
        _connect_when_reachable(settings, stop_now)), daemon=True)
    gone.start()
    gone.join(0.5)
    stop_now.set()
    gone.join(10)
    assert late == [None]
