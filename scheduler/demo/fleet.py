"""The demo's simulated fleet: a generated Ansible INI inventory and a few service windows.

``write_inventory(path, hosts)`` spreads the hosts over 30 customer groups (``customer-acme``
...) nested in 3 region groups (``region-eu`` ...), each host with an ``ansible_host`` address;
``add_windows(engine)`` records three recurring windows (cron, duration, IANA zone) assigned to
customer groups, as rows of the SQL record. The demo's tasks do not ask for windows; they are
there to be seen in the inventory, ``fleetsched top`` and reports.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["CUSTOMERS", "REGIONS", "WINDOWS", "add_windows", "write_inventory"]

CUSTOMERS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka",
             "tyrell", "cyberdyne", "soylent", "oscorp", "aperture", "blackmesa", "vandelay",
             "dunder", "gringotts", "monarch", "nakatomi", "oceanic", "pied", "prestige",
             "sterling", "tessier", "virtucon", "weyland", "yoyodyne", "zorg", "duff", "krusty")
REGIONS = ("eu", "us", "ap")
WINDOWS = (  # (name, cron, hours, zone, group): a few customers only work at night
    ("acme-sunday-night", "0 2 * * 0", 4, "Europe/Zurich", "customer-acme"),
    ("globex-weeknights", "0 22 * * 1-5", 6, "America/New_York", "customer-globex"),
    ("initech-saturday", "0 1 * * 6", 3, "Asia/Tokyo", "customer-initech"),
)


def write_inventory(path: Path, hosts: int) -> list[str]:
    """An INI inventory of ``hosts`` hosts in customer groups and regions; the group names."""
    per = math.ceil(hosts / len(CUSTOMERS))
    lines: list[str] = []
    regions: dict[str, list[str]] = {r: [] for r in REGIONS}
    made = 0
    for i, customer in enumerate(CUSTOMERS):
        group = f"customer-{customer}"
        count = min(per, hosts - made)
        if count <= 0:
            break
        lines.append(f"[{group}]")
        for n in range(count):
            name = f"{customer}-{n + 1:03d}"
            lines.append(f"{name} ansible_host=10.{i}.{n // 250}.{n % 250 + 1}")
        regions[REGIONS[i % len(REGIONS)]].append(group)
        made += count
    for region, groups in regions.items():
        lines.append(f"[region-{region}:children]")
        lines.extend(groups)
    path.write_text("\n".join(lines) + "\n")
    return [f"customer-{c}" for c in CUSTOMERS]


def add_windows(engine: Engine) -> list[str]:
    """The demo's service windows, assigned to customer groups (rows of the SQL record)."""
    from scheduler.record.models import Group, Window, WindowAssignment
    from scheduler.record.session import transaction

    names = []
    with transaction(engine) as session:
        for name, cron, hours, tz, group in WINDOWS:
            g = session.query(Group).filter_by(name=group).one_or_none()
            if g is None:
                continue
            w = Window(name=name, kind="recurring", cron=cron, duration_s=hours * 3600, tz=tz,
                       created_by="demo", description=f"{group}: maintenance window")
            w.assignments.append(WindowAssignment(group_id=g.id))
            session.add(w)
            names.append(f"{name} ({cron}, {hours}h {tz}) for {group}")
    return names
