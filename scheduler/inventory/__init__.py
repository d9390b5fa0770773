"""Host inventory: reading Ansible inventories (JSON, INI, YAML), validating them, and
syncing them into the SQL system of record; the stored hosts and groups.

Public API:

- parsing (no database): ``load_inventory(path, fmt=None) -> Inventory``,
  ``resolve(inventory) -> Resolved``, ``InventoryError`` (one line ``file:line:col: message``,
  exit code 2), and the validators in ``scheduler.inventory.validate``;
- import: ``import_inventory(engine, path, operator=..., prune=..., dry_run=...)``;
- export: ``read_export(session, hosts)`` and ``render_export(export, fmt)``, the stored
  inventory as Ansible reads it (``EXPORT_FORMATS``: ansible-json, ini, yaml), and
  ``from_ansible_json``, the ansible-json export read back;
- the stored inventory (a session in a transaction): ``group_members(session, group)``,
  ``hosts_in_groups(session, groups)``, ``group_member_map(session)`` (and
  ``group_member_map_of(session, hosts)``, restricted to a few hosts), ``list_hosts``,
  ``show_host``, ``list_groups``, ``add_host``, ``remove_host``.

Opening the database (``open_database``, ``transaction``) is ``scheduler.record.session``.
"""

from scheduler.inventory.export import (
    EXPORT_FORMATS,
    Export,
    from_ansible_json,
    read_export,
    render_export,
)
from scheduler.inventory.model import Inventory, InventoryError, Location
from scheduler.inventory.resolve import GroupRecord, HostRecord, Resolved, resolve
from scheduler.inventory.service import ImportResult, import_inventory
from scheduler.inventory.source import FORMATS, MAX_BYTES, detect_format, load_inventory, parse_text
from scheduler.inventory.store import (
    CLI_SOURCE,
    add_host,
    group_limits,
    group_member_map,
    group_member_map_of,
    group_members,
    hosts_in_groups,
    limit_count,
    limited_groups_of,
    list_groups,
    list_hosts,
    remove_group,
    remove_host,
    set_group_limit,
    show_host,
)
from scheduler.inventory.sync import HostChange, SyncPlan

__all__ = [
    "CLI_SOURCE", "EXPORT_FORMATS", "Export", "FORMATS", "GroupRecord", "HostChange", "HostRecord", "ImportResult",
    "Inventory", "InventoryError", "Location", "MAX_BYTES", "Resolved", "SyncPlan",
    "add_host", "detect_format", "from_ansible_json", "group_limits", "group_member_map", "group_member_map_of",
    "limit_count",
    "limited_groups_of", "set_group_limit", "group_members", "hosts_in_groups",
    "import_inventory", "list_groups", "list_hosts", "load_inventory",
    "parse_text", "read_export", "remove_group", "render_export", "remove_host", "resolve", "show_host",
]
