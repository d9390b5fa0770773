"""Hosts and groups over the API (``scheduler.verbs.inventory``'s verbs), each returning what
the local verb returns.

1. ``import_hosts`` reads and parses the file here, as the local verb does before it opens
   anything (a bad file is the same one line, and nothing is sent), then sends its text under
   the file's name: the server records the hosts' source as ``api:NAME``, so a prune removes
   only what that name imported.
2. ``check_hosts`` asks for the target's hosts a page at a time (``POST /hosts/check``), each
   page as many hosts as the server checks well within the answer's timeout, with the server's
   SSH settings: executor options name files on this machine, and are refused.
3. ``export_hosts`` reads the ``ansible-json`` export and rebuilds the ``Export`` the command
   renders in the format asked.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scheduler.errors import ValidationError
from scheduler.remote.client import READ_S, Client
from scheduler.verbs.inventory import CHECK_MAX, Changed, Checked, Imported, Limited

if TYPE_CHECKING:
    from collections.abc import Callable

    from scheduler.inventory import Export

__all__ = ["add_host", "check_hosts", "export_hosts", "host_history", "import_hosts",
           "limit_group", "list_groups", "list_hosts", "remove_group", "remove_host",
           "show_host"]


def _path(name: str) -> str:
    return quote(name, safe="")


def list_hosts(stores: Client, *, group: str | None = None, match: str | None = None,
               limit: int | None = None) -> list[dict[str, Any]]:
    """Hosts by name, every page of ``GET /hosts``."""
    return stores.pages("/hosts", group=group, match=match, limit=limit)


def show_host(stores: Client, name: str) -> dict[str, Any]:
    return stores.get(f"/hosts/{_path(name)}")


def host_history(stores: Client, name: str, *, limit: int = 1000) -> list[dict[str, Any]]:
    """The newest ``limit`` events, oldest first as the local verb answers (the API pages them
    newest first)."""
    rows = stores.pages(f"/hosts/{_path(name)}/history", limit=limit)
    return [{**r, "ts": datetime.fromisoformat(r["ts"]) if r.get("ts") else None}
            for r in rows[::-1]]


def list_groups(stores: Client) -> list[dict[str, Any]]:
    return stores.get("/groups")["items"]


def _inventory_name(path: Path) -> str:
    """The file's name as an inventory name of the API (letters, digits, ``._-``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", path.name).lstrip("._-")[:100]
    return name or "inventory"


def import_hosts(stores: Client, _principal: None, path: Path, *, fmt: str | None = None,
                 prune: bool = False, dry_run: bool = False) -> Imported:
    """Send the inventory file at ``path`` (see the module docstring, point 1)."""
    from scheduler.inventory.source import parse_inventory, read_text

    text = read_text(path)
    parsed = parse_inventory(text, str(path), fmt)
    done = stores.post("/hosts/import", {"name": _inventory_name(Path(path)), "inventory": text,
                                         "format": parsed.format, "prune": prune,
                                         "dry_run": dry_run})
    return Imported(path=done["source"], format=done["format"], dry_run=done["dry_run"],
                    prune=done["prune"], counts=done["counts"], changes=done["changes"],
                    groups=done["groups"], skipped_secrets=done["skipped_secrets"],
                    tenants=done["tenants"], notes=done["notes"])


def add_host(stores: Client, _principal: None, name: str, *, address: str | None = None,
             port: int | None = None, user: str | None = None, groups: list[str] | None = None,
             host_vars: dict[str, Any] | None = None) -> Changed:
    done = stores.post("/hosts", {"name": name, "address": address, "port": port, "user": user,
                                  "groups": groups or [], "vars": host_vars or {}})
    return Changed(created=done["created"], notes=done["notes"])


def remove_host(stores: Client, _principal: None, name: str) -> Changed:
    return Changed(notes=stores.delete(f"/hosts/{_path(name)}")["notes"])


def remove_group(stores: Client, _principal: None, name: str) -> Changed:
    done = stores.delete(f"/groups/{_path(name)}")
    return Changed(count=done["hosts"], notes=done["notes"])


def limit_group(stores: Client, _principal: None, name: str, max_busy: str | None) -> Limited:
    done = stores.post(f"/groups/{_path(name)}/limit", {"max_busy": max_busy})
    return Limited(count=done["max_busy"], members=done["members"], by=done["by"])


def check_hosts(stores: Client, target: str, *, options: dict[str, Any], concurrency: int,
                timeout_s: float, become_user: str | None = None,
                note: Callable[[str], None] | None = None) -> Checked:
    """Every page of ``POST /hosts/check`` (see the module docstring, point 2); ``note`` gets
    the line saying how many hosts are checked once the first page says it."""
    from scheduler.health.hostcheck import summarize
    from tasks.executors.ssh.probe import Probe

    if options:
        raise ValidationError(
            "--executor-option is not available through a server: it checks with its own SSH "
            "settings (identity files, known_hosts, ssh config)",
            hint="drop --executor-option, or run hosts check where the key is, without "
                 "--server")
    # A host may take its timeout at each step (connect, handshake, login, a command): a page
    # holds the rounds of `concurrency` hosts that fit a quarter of the answer's timeout.
    rounds = max(1, int(READ_S / 4 // timeout_s))
    body: dict[str, Any] = {"target": target, "concurrency": concurrency,
                            "timeout": f"{timeout_s}s", "become_user": become_user,
                            "limit": min(CHECK_MAX, concurrency * rounds)}
    probes: list[Probe] = []
    offset: int | None = 0
    page: dict[str, Any] = {}
    while offset is not None:
        page = stores.post("/hosts/check", {**body, "offset": offset})
        if offset == 0 and note is not None:
            note(f"checking {page['selected']} host(s), "
                 f"{min(concurrency, page['selected'])} at a time")
        probes += [Probe(**p) for p in page["hosts"]]
        offset = page["next_offset"]
    return Checked(probes=probes, counts=summarize(probes), selected=page["selected"],
                   known_hosts=page["known_hosts"])


def export_hosts(stores: Client, target: str = "all") -> Export:
    """The ``target`` hosts, their groups and variables (module docstring, point 3)."""
    import json

    from scheduler.inventory import from_ansible_json

    return from_ansible_json(json.loads(stores.get_text("/hosts/export", target=target,
                                                        format="ansible-json")))
