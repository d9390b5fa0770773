"""``fleetsched hosts check``: can the workers reach these hosts, and as whom?

1. select the hosts with a target expression, as ``submit`` does
   (``scheduler.submission.targets``); a malformed expression is a ``ValidationError``, one
   that matches nothing a ``NotFoundError``;
2. read the ssh executor's options as a worker would
   (``tasks.executors.ssh.connect.ssh_options``: the same ``known_hosts``, ssh config and
   identity files), with the per-host timeout applied to
   connect, banner and authentication;
3. probe every host in a thread pool of ``concurrency`` (``tasks.executors.ssh.probe.probe_host``),
   calling ``on_result`` as each one ends; hosts behind the same jump hosts share one login to
   them (``tasks.executors.ssh.tunnel.Bastions``), closed when the check ends;
4. count the verdicts for the summary line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from sqlalchemy.engine import Engine

from scheduler.config import Settings
from scheduler.errors import NotFoundError, ValidationError
from tasks.host import Host
from tasks.executors.ssh.probe import STATUSES, Probe, probe_host

__all__ = ["SUMMARY_WORDS", "check_hosts", "select_hosts", "summarize"]

# How the summary line names each status (``3 ok, 1 unreachable, ...``).
SUMMARY_WORDS = {"ok": "ok", "unreachable": "unreachable", "unknown-key": "unknown key",
                 "key-mismatch": "key mismatch", "auth-failed": "auth failed",
                 "become-failed": "become failed", "no-sftp": "no SFTP", "error": "error"}


def select_hosts(engine: Engine, target: str) -> list[Host]:
    """The stored hosts ``target`` selects, sorted by name (point 1)."""
    from scheduler.inventory import group_member_map
    from scheduler.record.session import transaction
    from scheduler.submission.fanout import host_conns
    from scheduler.submission.targets import host_vars_map, parse_target, resolve_target

    parsed = parse_target(target)  # ValidationError: bad input, exit code 2
    with transaction(engine, commit=False) as session:
        members = group_member_map(session)
        try:
            names = resolve_target(parsed, members.get("all", set()), members,
                                   host_vars_map(session) if parsed.needs_vars else None)
        except ValidationError as exc:
            raise NotFoundError(str(exc), hint=exc.hint or "see `fleetsched hosts list`"
                                ) from None
        rows = {r.name: r for r in host_conns(session, names)}
    return [Host(name=n, address=rows[n].address or None, port=int(rows[n].port or 22),
                 user=rows[n].user or None, vars=dict(rows[n].vars or {})) for n in names]


def check_hosts(hosts: list[Host], settings: Settings, *, options: Mapping[str, Any] | None = None,
                concurrency: int = 20, timeout: float = 10.0,
                on_result: Callable[[Probe], None] | None = None) -> list[Probe]:
    """Probe ``hosts`` in parallel (points 2 and 3); the probes in the order of ``hosts``."""
    from pathlib import Path

    from tasks.executors.ssh.connect import ssh_options
    from tasks.executors.ssh.tunnel import Bastions

    given = dict(options or {})
    for name in ("connect_timeout", "banner_timeout", "auth_timeout"):
        given.setdefault(name, timeout)
    read = ssh_options(given, settings)  # ValidationError for an unknown or bad option
    found: dict[str, Probe] = {}
    bastions = Bastions(Path(settings.known_hosts), read)
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(hosts) or 1))) as pool:
            futures = {pool.submit(probe_host, h, settings, read, timeout, bastions): h
                       for h in hosts}
            for future in as_completed(futures):
                try:
                    probe = future.result()
                except Exception as exc:  # noqa: BLE001 - one host's surprise is its row
                    probe = Probe(host=futures[future].name, status="error",
                                  error=f"{type(exc).__name__}: {exc}")
                found[probe.host] = probe
                if on_result is not None:
                    on_result(probe)
    finally:
        bastions.close_all()
    return [found[h.name] for h in hosts]


def summarize(probes: list[Probe]) -> dict[str, int]:
    """How many hosts ended with each status (every status present, in ``STATUSES`` order)."""
    counts = Counter(p.status for p in probes)
    return {s: counts.get(s, 0) for s in STATUSES}
