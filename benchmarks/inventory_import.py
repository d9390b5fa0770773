"""Inventory import benchmark: parsing each format, and syncing into SQLite and PostgreSQL.

    .venv/bin/python benchmarks/inventory_import.py            # 3,000 and 30,000 hosts
    .venv/bin/python benchmarks/inventory_import.py --quick    # 3,000 hosts, fewer runs

Generates one fleet of N hosts (3 regions > 30 racks > hosts, an ``ansible_host`` and two vars
per host, group vars at every level) written as INI, YAML and ``ansible-inventory --list``
JSON. Times, as medians of several runs in the same process:

- ``parse``: read + parse + resolve, per format (no database);
- ``first``: the first import into an empty database (every host added);
- ``again``: importing the same file again (nothing changes: the cost of the diff);
- ``change``: a file where 10% of hosts changed address and 5% are gone, with ``--prune``.

The ratio ``first / parse(json)`` says how much of an import is SQL. The PostgreSQL server is a
private cluster (tests.servers.start_postgres) unless FLEETSCHED_BENCH_DATABASE_URL names one on
which a database may be created. Prints a table and JSON (benchmarks/results/inventory.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import median_seconds, save_result  # noqa: E402
from scheduler.inventory import import_inventory, load_inventory, resolve  # noqa: E402
from scheduler.record import make_engine  # noqa: E402
from scheduler.record.migrate import upgrade  # noqa: E402
from tests.servers import start_postgres  # noqa: E402

REGIONS, RACKS = 3, 30


def fleet(n: int, *, changed: float = 0.0, gone: float = 0.0) -> dict[str, Any]:
    """{"hosts": {name: vars}, "racks": {rack: [names]}, "regions": {region: [racks]}}."""
    hosts: dict[str, dict[str, Any]] = {}
    racks: dict[str, list[str]] = {}
    keep = n - int(n * gone)
    for i in range(keep):
        rack = f"rack{i % RACKS:02d}"
        octet = 200 if i < n * changed else 10
        hosts[f"node{i:06d}"] = {"ansible_host": f"10.{octet}.{i // 256 % 256}.{i % 256}",
                                 "serial": f"SN{i:08d}", "slot": i % 42}
        racks.setdefault(rack, []).append(f"node{i:06d}")
    regions = {f"region{r}": [k for j, k in enumerate(sorted(racks)) if j % REGIONS == r]
               for r in range(REGIONS)}
    return {"hosts": hosts, "racks": racks, "regions": regions}


def write_ini(f: dict[str, Any], path: Path) -> None:
    out = ["[all:vars]", "ntp=ntp.example.com", ""]
    for rack, names in f["racks"].items():
        out.append(f"[{rack}]")
        out += [f"{h} ansible_host={f['hosts'][h]['ansible_host']} serial={f['hosts'][h]['serial']}"
                f" slot={f['hosts'][h]['slot']}" for h in names]
        out += [f"[{rack}:vars]", f"rack={rack}", ""]
    for region, racks in f["regions"].items():
        out += [f"[{region}:children]", *racks, f"[{region}:vars]", f"region={region}", ""]
    path.write_text("\n".join(out))


def write_yaml(f: dict[str, Any], path: Path) -> None:
    out = ["all:", "  vars:", "    ntp: ntp.example.com", "  children:"]
    for region, racks in f["regions"].items():
        out += [f"    {region}:", "      vars:", f"        region: {region}", "      children:"]
        for rack in racks:
            out += [f"        {rack}:", "          vars:", f"            rack: {rack}",
                    "          hosts:"]
            for h in f["racks"][rack]:
                v = f["hosts"][h]
                out += [f"            {h}:", f"              ansible_host: {v['ansible_host']}",
                        f"              serial: {v['serial']}", f"              slot: {v['slot']}"]
    path.write_text("\n".join(out) + "\n")


def write_json(f: dict[str, Any], path: Path) -> None:
    doc: dict[str, Any] = {"_meta": {"hostvars": f["hosts"]},
                           "all": {"children": ["ungrouped", *f["regions"]],
                                   "vars": {"ntp": "ntp.example.com"}}}
    for region, racks in f["regions"].items():
        doc[region] = {"children": racks, "vars": {"region": region}}
    for rack, names in f["racks"].items():
        doc[rack] = {"hosts": names, "vars": {"rack": rack}}
    path.write_text(json.dumps(doc, indent=1))


def databases(tmp: Path) -> tuple[list[tuple[str, Callable[[], str]]], Any]:
    counter = iter(range(10_000))
    dbs: list[tuple[str, Callable[[], str]]] = [
        ("sqlite", lambda: f"sqlite:///{tmp / f'bench{next(counter)}.db'}")]
    server = None
    external = os.environ.get("FLEETSCHED_BENCH_DATABASE_URL")
    admin_url = external
    if not external:
        try:
            server = start_postgres(tmp / "pg")
            admin_url = server.url("postgres")
        except BaseException as exc:  # noqa: BLE001 - pytest.skip raises outside pytest too
            print(f"postgresql skipped: {exc}", file=sys.stderr)
    if admin_url:
        def fresh_pg() -> str:
            name = f"fleetsched_bench_{uuid.uuid4().hex[:6]}"
            admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            admin.dispose()
            return sa.engine.make_url(admin_url).set(database=name).render_as_string(
                hide_password=False)
        dbs.append(("postgresql", fresh_pg))
    return dbs, server


def bench_db(new_url: Callable[[], str], files: dict[str, Path], runs: int) -> dict[str, float]:
    engines: list[sa.Engine] = []

    def fresh() -> sa.Engine:
        url = new_url()
        upgrade(url)
        engines.append(make_engine(url))
        return engines[-1]

    current: dict[str, sa.Engine] = {}
    parsed = load_inventory(files["json"])
    try:
        first = median_seconds(lambda: import_inventory(current["e"], files["json"],
                                                        operator="bench", inventory=parsed),
                               runs, setup=lambda: current.update(e=fresh()))
        again = median_seconds(lambda: import_inventory(current["e"], files["json"],
                                                        operator="bench", inventory=parsed), runs)
        changed = load_inventory(files["changed"])

        def reset() -> None:
            current.update(e=fresh())
            import_inventory(current["e"], files["json"], operator="bench", inventory=parsed)

        change = median_seconds(lambda: import_inventory(
            current["e"], files["json"], operator="bench", prune=True, inventory=changed),
            runs, setup=reset)
    finally:
        for e in engines:
            e.dispose()
    return {"first_s": first, "again_s": again, "change_s": change}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3,000 hosts, fewer runs")
    args = parser.parse_args()
    sizes = [3_000] if args.quick else [3_000, 30_000]
    runs = 3 if args.quick else 5
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        dbs, server = databases(tmp)
        try:
            for n in sizes:
                f = fleet(n)
                files = {"ini": tmp / f"f{n}.ini", "yaml": tmp / f"f{n}.yml",
                         "json": tmp / f"f{n}.json", "changed": tmp / f"c{n}.json"}
                write_ini(f, files["ini"])
                write_yaml(f, files["yaml"])
                write_json(f, files["json"])
                write_json(fleet(n, changed=0.10, gone=0.05), files["changed"])
                parse = {fmt: median_seconds(lambda p=files[fmt]: resolve(load_inventory(p)), runs)
                         for fmt in ("ini", "yaml", "json")}
                for name, new_url in dbs:
                    row = {"hosts": n, "db": name,
                           **{f"parse_{k}_s": v for k, v in parse.items()},
                           **bench_db(new_url, files, runs)}
                    row["first_over_parse_json"] = row["first_s"] / parse["json"]
                    results.append(row)
                    print(f"{n:>6} hosts {name:<10} parse ini {parse['ini']:.3f}s "
                          f"yaml {parse['yaml']:.3f}s json {parse['json']:.3f}s | "
                          f"import first {row['first_s']:.3f}s again {row['again_s']:.3f}s "
                          f"change+prune {row['change_s']:.3f}s | first/parse(json) "
                          f"{row['first_over_parse_json']:.1f}x", flush=True)
        finally:
            if server is not None:
                server.stop(mode="immediate")
    save_result("inventory", {"runs": runs, "results": results})
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
