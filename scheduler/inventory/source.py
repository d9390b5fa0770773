"""Reading an inventory file safely and choosing its parser.

What it owns:

1. refusing what is not a text inventory before any parser sees it: a missing path, a
   directory, a file over ``MAX_BYTES``, binary data (a NUL byte), text that is not UTF-8
   (with the line and column of the first bad byte), an empty file, an Ansible Vault file;
2. choosing the format: ``--format`` if given, else the extension (``.json``, ``.yml`` /
   ``.yaml``, ``.ini``), else a look at the content;
3. ``load_inventory(path)``: read, parse, and check the result defines at least one host;
   ``decode_text`` and ``parse_inventory`` do the same for an inventory sent as text (the
   HTTP API's import), with the same refusals.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from scheduler.inventory import ini_format, json_format, yaml_format
from scheduler.inventory.model import VAULT_HINT, Inventory, InventoryError, Location

MAX_BYTES = 50 * 1024 * 1024
FORMATS = ("json", "ini", "yaml")

_EXTENSIONS = {".json": "json", ".yml": "yaml", ".yaml": "yaml", ".ini": "ini", ".cfg": "ini"}
_SECTION = re.compile(r"^\s*\[[^\]\s]+\]\s*([#;].*)?$")


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, col


def read_text(path: str | os.PathLike[str]) -> str:
    """The file's text, or an ``InventoryError`` saying why it is not a text inventory."""
    p = Path(path)
    name = str(path)
    try:
        if p.is_dir():
            raise InventoryError(name, "is a directory, not an inventory file",
                                 hint="run `ansible-inventory -i DIR --list > inv.json` "
                                      "and import inv.json")
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise InventoryError(name, f"file is {size / 1e6:.1f} MB, over the "
                                       f"{MAX_BYTES // (1024 * 1024)} MB limit for an inventory")
        with p.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise InventoryError(name, "no such file") from None
    except OSError as exc:
        raise InventoryError(name, f"cannot read: {exc.strerror or exc}") from None
    return decode_text(data, name)


def decode_text(data: bytes, name: str, *, max_bytes: int = MAX_BYTES) -> str:
    """``data`` (an inventory named ``name``) as text, or an ``InventoryError`` saying why it
    is not a text inventory: over ``max_bytes``, binary, not UTF-8, empty, encrypted."""
    if len(data) > max_bytes:
        raise InventoryError(name, f"file is over the {_size(max_bytes)} limit")
    nul = data.find(b"\x00")
    if nul >= 0:
        line, col = _line_col(data, nul)
        raise InventoryError(Location(name, line, col),
                             "binary data (a NUL byte): not a text inventory")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        raise InventoryError(Location(name, line, col),
                             f"not UTF-8 text (byte 0x{data[exc.start]:02x})",
                             hint="convert the file to UTF-8, e.g. with iconv") from None
    if not text.strip():
        raise InventoryError(Location(name, 1), "the file is empty",
                             hint="import a file that defines hosts")
    if text.lstrip().startswith("$ANSIBLE_VAULT"):
        raise InventoryError(Location(name, 1), "the file is encrypted with Ansible Vault",
                             hint=VAULT_HINT)
    return text


def _size(limit: int) -> str:
    return (f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024
            else f"{limit // 1024} KB")


def detect_format(path: str | os.PathLike[str], text: str) -> str:
    """``json``, ``ini`` or ``yaml``: by extension, else by content."""
    ext = Path(path).suffix.lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return "json"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line == "---" or _SECTION.match(line) is None and re.match(r"^[^\s=]+:(\s|$)", line):
            return "yaml"
        return "ini"
    return "ini"


def parse_text(text: str, source: str, fmt: str) -> Inventory:
    """Parse ``text`` (from ``source``) in format ``fmt``."""
    if fmt == "json":
        return json_format.parse(text, source)
    if fmt == "yaml":
        return yaml_format.parse(text, source)
    if fmt == "ini":
        return ini_format.parse(text, source)
    raise InventoryError(source, f"unknown inventory format {fmt!r}",
                         hint=f"use one of {', '.join(FORMATS)}")


def load_inventory(path: str | os.PathLike[str], fmt: str | None = None) -> Inventory:
    """Read and parse the inventory at ``path``; it must define at least one host."""
    return parse_inventory(read_text(path), str(path), fmt)


def parse_inventory(text: str, name: str, fmt: str | None = None) -> Inventory:
    """Parse inventory ``text`` named ``name`` (its format: ``fmt``, else by the name's
    extension, then by content); it must define at least one host."""
    inventory = parse_text(text, name, fmt or detect_format(name, text))
    if not inventory.hosts:
        raise InventoryError(Location(name, 1), "the inventory defines no hosts",
                             hint="check the file is the inventory you meant")
    return inventory


__all__ = ["FORMATS", "MAX_BYTES", "decode_text", "detect_format", "load_inventory",
           "parse_inventory", "parse_text", "read_text"]
