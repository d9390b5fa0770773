"""fleetsched side by side with RQ, Celery, arq, Dramatiq, Huey (W1-W4) and with Ansible,
parallel-ssh and the OpenSSH client (W5, SSH fan-out): the workloads of issue 16.

    .venv/bin/python benchmarks/peers/run.py                  # full: 3 runs of everything
    .venv/bin/python benchmarks/peers/run.py --quick          # smaller sizes, one run (< 5 min)
    .venv/bin/python benchmarks/peers/run.py --quick --smoke  # tiny sizes: does it all work?
    .venv/bin/python benchmarks/peers/run.py --only W2,W3 --systems fleetsched,huey
    .venv/bin/python benchmarks/peers/run.py --only W5          # SSH fan-out, 100 sshd hosts

Run it with the interpreter that has fleetsched installed (the project's ``.venv``): fleetsched
is measured as installed there (put a checkout first on ``PYTHONPATH`` to measure that one),
its modules compiled to bytecode first as pip compiles a wheel's (``compile_bytecode``).
Each peer is installed by pip into its own virtual environment under
``benchmarks/peers/.venvs/`` on first use (envs.py). One private redis-server serves the whole
run; it is flushed before every measurement. The runs of a measurement are interleaved with the
other systems' (run 1 of every row, then run 2 ...), so a noisy minute hits every system.
Prints the machine, every system's version and settings, one table per workload (report.py),
and writes everything to benchmarks/results/peers.json. The smoke mode asserts no timing: it
fails only when a system cannot run a workload.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks._common import RESULTS, compile_bytecode, private_redis, save_result
from benchmarks.peers import envs
from benchmarks.peers.report import table
from benchmarks.peers.workloads import (
    FLEETSCHED,
    QUEUE_PEERS,
    SIZES,
    SSH_PEERS,
    WORKLOADS,
    Plan,
    plans,
)

DRIVER = Path(__file__).resolve().parent / "driver.py"
SYSTEMS = (FLEETSCHED, *QUEUE_PEERS, *SSH_PEERS)
OPENSSH = "openssh"  # no environment: ssh and xargs, driven from this interpreter
FLEET_NET = "127.0.50"
LOGS = RESULTS / "peers-logs"


def interpreter(system: str) -> Path:
    if system == OPENSSH:
        for tool in ("ssh", "xargs"):
            if shutil.which(tool) is None:
                sys.exit(f"error: {tool} is not on PATH (apt-get install openssh-client)")
        return Path(sys.executable)
    if system == FLEETSCHED:
        try:
            importlib.metadata.version("fleetsched")
        except importlib.metadata.PackageNotFoundError:
            sys.exit(f"error: fleetsched is not installed in {sys.executable}; run this with the "
                     "project's .venv/bin/python")
        return Path(sys.executable)
    return envs.python_of(system)


def call(system: str, url: str, args: tuple[str, ...], timeout: float = 1800) -> dict:
    """One driver run; its JSON, or {"error": one line}."""
    python = interpreter(system)
    env = {**os.environ, "BENCH_REDIS_URL": url,
           "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{system}-{args[0]}.log"
    try:
        done = subprocess.run([str(python), str(DRIVER), system, *args, "--log", str(log)],
                              env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"no result after {timeout:.0f} s"}
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        return {"error": lines[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine(client) -> dict:
    info = client.info("server")
    return {"cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "redis": info["redis_version"],
            "loadavg_start": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                    time.gmtime())}


def describe(systems: list[str], url: str) -> dict:
    out = {}
    for system in systems:
        d = call(system, url, ("describe",))
        if "error" in d:
            sys.exit(f"error: {system} cannot start: {d['error']}")
        d["versions"] = ({"fleetsched": importlib.metadata.version("fleetsched"),
                          "redis-py": importlib.metadata.version("redis")}
                         if system == FLEETSCHED else {"openssh": d.pop("version")}
                         if system == OPENSSH else envs.versions(system))
        out[system] = d
    return out


@contextlib.contextmanager
def ssh_fleet(count: int, user: str | None) -> Iterator[Path]:
    """W5's ``count`` sshd hosts, started once (tests/fleet.py), described in a JSON file; every
    system logs in as ``user`` (default: the current user)."""
    from tests.fleet import UNPRIVILEGED_LOGIN, current_user, sshd_binary, start_fleet

    if user not in (None, current_user(), UNPRIVILEGED_LOGIN):
        sys.exit(f"error: --fleet-user must be {current_user()} or {UNPRIVILEGED_LOGIN} (the "
                 "logins the fleet's sshd accepts the key for)")

    if sshd_binary() is None:
        sys.exit("error: W5 needs OpenSSH's sshd (apt-get install openssh-server, or set "
                 "FLEETSCHED_TEST_SSHD)")
    base = Path(tempfile.mkdtemp(prefix="fs-peers-fleet-"))
    t0 = time.time()
    fleet = start_fleet(base, count=count, prefix="h", net=FLEET_NET)
    try:
        print(f"W5 fleet: {count} sshd hosts on {FLEET_NET}.1-{count} started in "
              f"{time.time() - t0:.1f} s; login {user or current_user()}", flush=True)
        path = base / "fleet.json"
        path.write_text(json.dumps({
            "identity": str(fleet.identity), "known_hosts": str(fleet.known_hosts),
            "ssh_config": str(fleet.ssh_config), "user": user or current_user(),
            "hosts": [[h.name, h.address, h.port] for h in fleet]}))
        yield path
    finally:
        fleet.stop()
        shutil.rmtree(base, ignore_errors=True)


def merged(result: dict, codes: list[str]) -> dict:
    """``result`` plus the other workloads of an earlier peers.json of the same mode."""
    old_path = RESULTS / "peers.json"
    try:
        old = json.loads(old_path.read_text())
    except (OSError, ValueError):
        return result
    if old.get("mode") != result["mode"]:
        return result
    kept = [r for r in old.get("results", []) if r["workload"] not in codes]
    tables = {k: v for k, v in old.get("tables", {}).items() if k not in codes}
    return {**result, "systems": {**old.get("systems", {}), **result["systems"]},
            "tables": {**tables, **result["tables"]}, "results": kept + result["results"],
            "earlier_runs": [*old.get("earlier_runs", []),
                             {k: old.get(k) for k in ("machine", "seconds", "runs")
                              } | {"workloads": sorted({r["workload"] for r in kept})}]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one run each")
    parser.add_argument("--smoke", action="store_true", help="with --quick: tiny sizes")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="workloads, e.g. W1,W3")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, from {', '.join(SYSTEMS)}")
    parser.add_argument("--runs", type=int, help="repetitions (default: 3 full, 1 quick)")
    parser.add_argument("--fleet-user", help="W5: log in to the sshd hosts as this user "
                        "(default: the current user; fleetsched-nopw, the test suite's login "
                        "with /bin/sh, keeps a heavy ~/.bashrc out of every host's time)")
    args = parser.parse_args()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    sizes = SIZES[mode]
    runs = args.runs or sizes.runs
    codes = [c.strip().upper() for c in args.only.split(",") if c.strip()]
    systems = [s.strip().lower() for s in args.systems.split(",") if s.strip()]
    for bad in [c for c in codes if c not in WORKLOADS] + [s for s in systems if s not in SYSTEMS]:
        sys.exit(f"error: unknown workload or system {bad!r}")
    started = time.time()
    todo = plans(codes, systems, sizes)
    systems = [s for s in systems if any(p.system == s for p in todo)]
    for system in systems:
        interpreter(system)  # install first: a peer that cannot be installed stops the run here
    if FLEETSCHED in systems:
        compile_bytecode()  # as pip compiles each peer's packages at install (envs.py)
    samples: dict[Plan, list[dict]] = {p: [] for p in todo}
    errors: dict[Plan, str] = {}
    fleet = (ssh_fleet(sizes.fanout, args.fleet_user) if "W5" in codes
             else contextlib.nullcontext(None))
    with private_redis() as client, fleet as fleet_json:
        kw = client.connection_pool.connection_kwargs
        url = f"redis://{kw['host']}:{kw['port']}/0"
        env = machine(client)
        print(f"machine: {env['cores']} cores, Python {env['python']}, redis-server "
              f"{env['redis']}, {env['platform']}, load average {env['loadavg_start'][0]:.2f} "
              f"at the start, {env['date']}; mode {mode}, {runs} run(s)")
        described = describe(systems, url)
        for system, d in described.items():
            versions = ", ".join(f"{k} {v}" for k, v in d["versions"].items())
            print(f"  {system}: {versions}; {d['settings']}")
        for run in range(runs):
            this_run: dict[tuple[str, tuple[str, ...]], dict] = {}  # rows sharing one call
            for plan in todo:
                t0 = time.time()
                args = plan.args + (("--fleet", str(fleet_json)) if plan.workload == "W5" else ())
                if (plan.system, args) not in this_run:
                    client.flushall()
                    this_run[plan.system, args] = call(plan.system, url, args)
                result = this_run[plan.system, args]
                if plan.part and "error" not in result:
                    result = result[plan.part]
                if "error" in result:
                    errors[plan] = result["error"]
                    print(f"error: {plan.workload} {plan.row} run {run + 1}: {result['error']}",
                          file=sys.stderr, flush=True)
                else:
                    samples[plan].append(result)
                print(f"  [{time.time() - started:5.0f}s] {plan.workload} {plan.row} run "
                      f"{run + 1}/{runs}: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    env["loadavg_end"] = os.getloadavg()
    print(f"load average at the end {env['loadavg_end'][0]:.2f}; "
          f"total {time.time() - started:.0f} s\n")
    tables = {}
    for code in codes:
        rows = {p.row: {"system": p.system, "samples": samples[p], "error": errors.get(p)}
                for p in todo if p.workload == code}
        size = next(a for p in todo if p.workload == code for a in p.args[2:3])
        tables[code] = table(code, rows, f"{int(size):,}")
        print(tables[code] + "\n")
    out = save_result("peers", merged({
        "mode": mode, "runs": runs, "machine": env, "systems": described,
        "seconds": time.time() - started, "tables": tables,
        "results": [{"workload": p.workload, "row": p.row, "system": p.system,
                     "args": p.args, "samples": samples[p], "error": errors.get(p)}
                    for p in todo]}, codes))
    print(f"written: {out}")
    if errors:
        sys.exit(f"error: {len(errors)} measurement(s) failed (see above)")


if __name__ == "__main__":
    main()
