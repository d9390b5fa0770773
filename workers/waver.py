"""The node's wave controller: moves rollouts in waves on (``scheduler.submission.rollout``).

1. Every second, read ``{P}:waving`` (the tasks whose rollout in waves is not over) of every
   queue shard (``queue_shards``): a task's rollout lives in its own shard.
2. For each, take the task's short lock (in the task's shard) (``Keys.wave_lock``: SET NX PX 10 s, a token of this
   node, 2 minutes while a health check runs)
   and run one ``rollout.step``: release the next wave, start a pause, a gate or a check, stop
   the rollout, or nothing. Every node runs this loop; the lock keeps them from acting on one
   task at once, the compare-and-set scripts make a duplicate step a no-op.
3. The health check between waves runs here: the command through the task's own executor
   (``tasks.executors.build_executor``, strict host keys as for every job) on each host of
   the finished wave, a few hosts at a time.
4. A failure (Redis down, a bug) is logged and tried again next round: the state is in Redis,
   so a node that dies mid-step leaves nothing another node cannot pick up.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import redis

from scheduler.queue.client import Queue
from scheduler.queue.keys import Keys
from scheduler.queue.presence import redis_now_ms
from scheduler.queue.shards import Shards
from scheduler.queue.types import text
from scheduler.redact import Redactor, redact_exception
from scheduler.redisdb.connect import REDIS_ERRORS
from scheduler.submission import rollout

if TYPE_CHECKING:
    from scheduler.config import Settings

log = logging.getLogger(__name__)

INTERVAL_S = 1.0  # between rounds
CHECK_THREADS = 8  # hosts checked at once


class Waver:
    """The wave controller thread of one node (see the module docstring)."""

    def __init__(self, settings: Settings, client: redis.Redis, keys: Keys) -> None:
        """``keys``: shard 0's (the queue prefix); the other shards follow from
        ``settings.queue_shards``."""
        self.settings = settings
        self.client = client
        self.keys = keys
        self.queue = Queue(client, keys)
        count = int(getattr(settings, "queue_shards", 1) or 1)
        self.queues = [self.queue] + [Queue(client, k)
                                      for k in Shards(keys.prefix, count).all[1:]]
        self.token = secrets.token_hex(8)
        self._lock = ""  # the task lock held by the step in progress
        self._keys = keys  # the shard of that task
        self.steps = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(INTERVAL_S):
            try:
                self.round()
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.error("wave controller round failed (%s: %s)", type(exc).__name__,
                          redact_exception(exc))

    def round(self) -> None:
        """One pass over the tasks in waves, shard by shard."""
        failed: Exception | None = None
        for queue in self.queues:
            try:
                self._round(queue)
            except REDIS_ERRORS as exc:  # one silent shard holds up no other's rollouts
                failed = failed or exc
        if failed is not None:
            raise failed

    def _round(self, queue: Queue) -> None:
        keys = queue.keys
        for member in sorted(self.client.smembers(keys.waving)):
            task_id = text(member)
            self._keys = keys
            lock = self._lock = keys.wave_lock(task_id)
            if not self.client.set(lock, self.token, nx=True, px=rollout.LOCK_MS):
                continue
            try:
                # the clock of the task's own shard, which wrote its wave times
                did = rollout.step(queue, task_id, redis_now_ms(self.client, keys),
                                   self.check)
                self.steps += 1
                if did not in ("running", "pausing", "gated", "stopped", "paused"):
                    log.info("task %s rollout: %s", task_id, did)
            finally:
                if text(self.client.get(lock) or "") == self.token:
                    self.client.delete(lock)

    def check(self, task: dict[str, str], hosts: list[str], command: str) -> list[str]:
        """Run ``command`` on every host; one line per host where it failed."""
        from tasks.host import Host
        from tasks.executors import build_executor

        self.client.pexpire(self._lock, rollout.CHECK_LOCK_MS)  # held while the check runs
        spec = json.loads(task.get("spec") or "{}")
        executor = build_executor(spec.get("executor") or "ssh",
                                  spec.get("executor_options") or {}, self.settings)
        pipe = self.client.pipeline(transaction=False)
        for name in hosts:
            pipe.hgetall(self._keys.host(name))  # the copies written with the task
        rows = {name: {text(k): text(v) for k, v in row.items()}
                for name, row in zip(hosts, pipe.execute())}

        def one(name: str) -> str | None:
            row = rows[name]
            host = Host(name, row.get("address") or None, int(row.get("port") or 22),
                        row.get("user") or None, json.loads(row.get("vars") or "{}"))
            # a become password the session reads is masked in what the check reports (its
            # line goes into the wave-stop event), as a job's runner masks it
            redactor = Redactor()
            try:
                opened = (executor.session(host, redactor=redactor)  # type: ignore[call-arg]
                          if executor.name == "ssh" else executor.session(host))
                with opened as session:
                    result = session.run(["sh", "-c", command], rollout.CHECK_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - unreachable, host key, auth: a failure
                return f"{name}: {type(exc).__name__}: {redactor.redact(redact_exception(exc))}"
            if result.exit_code == 0:
                return None
            said = (result.stderr_tail or result.stdout_tail or "").strip().splitlines()
            how = "timed out" if result.timed_out else f"exit {result.exit_code}"
            return f"{name}: {how}" + (f": {redactor.redact(said[-1])[:200]}" if said else "")

        try:
            with ThreadPoolExecutor(min(CHECK_THREADS, max(1, len(hosts)))) as pool:
                return [p for p in pool.map(one, hosts) if p]
        finally:
            executor.close()
