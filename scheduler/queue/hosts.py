"""The host hashes the workers read at claim time: ``Keys.host``, written by ``hosts.lua``.

1. :func:`write_hosts`: each host's connection data (address, port, user, vars as JSON, the
   limited groups it is in) into ``Keys.host``, ``HOST_BATCH`` hosts per script call; what a
   submission fans out and reconcile writes again;
2. the rows' format: one list per host, ``[name, address, port, user, vars JSON, groups]``,
   all text, as ``hosts.lua`` reads them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import redis

from scheduler.queue.keys import Keys
from scheduler.queue.scripts import run_script

__all__ = ["HOST_BATCH", "write_hosts"]

HOST_BATCH = 1_000  # host hashes per script call


def write_hosts(client: redis.Redis, keys: Keys, hosts: Iterable[Any]) -> int:
    """Write ``Keys.host`` for each host (objects with name, address, port, user, vars,
    optionally limits), ``HOST_BATCH`` hosts per script call (``lua/hosts.lua``)."""
    rows = [[host.name, host.address or "", str(int(host.port or 22)), host.user or "",
             _vars_json(host.vars),
             # the limited groups claim.lua counts the host's jobs in (`groups limit`)
             ",".join(getattr(host, "limits", ()))] for host in hosts]
    for start in range(0, len(rows), HOST_BATCH):
        chunk = rows[start:start + HOST_BATCH]
        run_script(client, "hosts", [keys.host(chunk[0][0])],
                   [keys.tag, json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))])
    return len(rows)


def _vars_json(vars_: Any) -> str:
    """A host's vars as the JSON text the workers read (sorted keys; ``{}`` for none)."""
    return json.dumps(vars_, sort_keys=True) if vars_ else "{}"
