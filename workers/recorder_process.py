"""A worker node's recorder in a process of its own (``fleetsched worker`` without
``--no-recorder``).

A recorder thread inside the master competes with the claim loop for the master's one
interpreter lock: draining 10,000 due jobs, the node acked about half as many jobs per second
with the thread as with the same recorder in a process beside it (docs/benchmarks.md,
"Workers"). So the node starts ``python -m workers.recorder_process <master pid>``:

1. The master checks the SQL schema and the notification policy itself first (a bad record or
   target stops the start, loudly, as before), then starts this process and writes the settings
   to its stdin (pickled, like a child's ``INIT``), keeping the pipe open.
2. The process dies with the master (``PR_SET_PDEATHSIG``, as a child does) and leaves SIGINT
   and SIGTERM to it: while running jobs finish their grace period, their events still get
   recorded.
3. It runs one ``Recorder`` per queue shard (``scheduler.record.sharded``: a thread each when
   there are several), all named ``worker:<worker id>`` (so another recorder takes their pending
   entries, on every shard, as soon as the node's heartbeat is gone) with the notice detector as
   ``on_batch``, until its stdin reaches end-of-file: the master closed it (``stop``) or is gone.
4. The master watches it: an exit it did not ask for stops the node (``on_death``), as the
   death of the recorder thread did.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.config import Settings

if TYPE_CHECKING:
    import redis
from scheduler.logs import configure_logging

log = logging.getLogger(__name__)


class RecorderProcess:
    """The master's handle on its recorder process."""

    def __init__(self, settings: Settings, worker_id: str, on_death: Callable[[str], None]) -> None:
        self._stopping = False
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", "workers.recorder_process",
                                      str(os.getpid())], stdin=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.proc.stdin.write(pickle.dumps((settings, worker_id)))
        self.proc.stdin.flush()
        self._watcher = threading.Thread(target=self._watch, args=(on_death,),
                                         name="recorder-watch", daemon=True)
        self._watcher.start()

    def _watch(self, on_death: Callable[[str], None]) -> None:
        code = self.proc.wait()
        if not self._stopping:
            on_death(f"the recorder process (pid {self.proc.pid}) exited with status {code}")

    def stop(self, timeout: float = 10.0) -> None:
        """Let it finish its batch and exit; kill it after ``timeout`` seconds."""
        self._stopping = True
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.error("the recorder process did not stop in %gs; killing it", timeout)
            self.proc.kill()
            self.proc.wait()


def _leave_to_the_master(_signum: int, _frame: object) -> None:
    """SIGINT and SIGTERM are the master's to act on (see the module docstring)."""


def main(argv: list[str]) -> None:
    from workers.child import die_with_parent

    die_with_parent(int(argv[1]))
    signal.signal(signal.SIGINT, _leave_to_the_master)
    signal.signal(signal.SIGTERM, _leave_to_the_master)
    settings, worker_id = pickle.load(sys.stdin.buffer)

    from scheduler.notify import Detector, Policy
    from scheduler.queue.shards import shards_of
    from scheduler.record.engine import make_engine
    from scheduler.record.recorder import NODE_CONSUMER_PREFIX
    from scheduler.record.sharded import ShardRecorders

    configure_logging(settings, worker_id)
    stop = threading.Event()

    def until_eof() -> None:
        sys.stdin.buffer.read()  # returns at end-of-file: the master closed it, or is gone
        stop.set()

    threading.Thread(target=until_eof, name="stdin", daemon=True).start()
    client = _connect_when_reachable(settings, stop)
    if client is None:
        return
    recorder = ShardRecorders(client, make_engine(settings.effective_database_url),
                              shards_of(settings), consumer_name=NODE_CONSUMER_PREFIX + worker_id,
                              on_batch=Detector(Policy.from_settings(settings)))
    recorder.run(stop)


def _connect_when_reachable(settings: Settings, stop: threading.Event) -> redis.Redis | None:
    """The queue's client, once Redis answers; None if the master stops first. The master
    reached Redis with these settings a moment ago, so a refusal now is an outage (a cluster
    master failing over as the node starts), waited out as the recorder waits out one later,
    not a reason to stop the node."""
    from scheduler.errors import RedisUnavailableError
    from scheduler.redisdb.connect import connect

    delay = 0.1
    while True:
        try:
            return connect(settings)
        except RedisUnavailableError as exc:
            log.warning("recorder: %s; retrying in %.1fs", exc, delay)
        if stop.wait(delay):
            return None
        delay = min(delay * 2, 5.0)


if __name__ == "__main__":
    main(sys.argv)
