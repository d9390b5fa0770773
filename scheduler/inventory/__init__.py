"""Host inventory: reading Ansible inventories (JSON, INI, YAML), validating them, and
syncing them into the SQL system of record.

Public API:

- ``load_inventory(path, fmt=None) -> Inventory`` and ``resolve(inventory) -> Resolved``;
- ``InventoryError`` (one line ``file:line:col: message``, exit code 2);
- the validators in ``scheduler.inventory.validate``.
"""

from scheduler.inventory.model import Inventory, InventoryError, Location
from scheduler.inventory.resolve import GroupRecord, HostRecord, Resolved, resolve
from scheduler.inventory.source import FORMATS, MAX_BYTES, detect_format, load_inventory, parse_text

__all__ = [
    "FORMATS", "GroupRecord", "HostRecord", "Inventory", "InventoryError", "Location",
    "MAX_BYTES", "Resolved", "detect_format", "load_inventory", "parse_text", "resolve",
]
