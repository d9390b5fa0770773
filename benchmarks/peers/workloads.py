"""The workloads of issue 16, their sizes per mode, and the measures each table shows.

A *measurement* is one driver call (driver.py): a system, a workload, a variant and a size.
W1 is measured for every peer one call per job, and for fleetsched three ways: one task of N
hosts through the library, the same through the ``fleetsched submit`` command, and one-host
tasks (the peers' one call per job) timed over the first ``sample`` jobs of an N-host
inventory (each one-host submit reads the inventory, so 10,000 of them would take minutes).
W5 (SSH fan-out) has peers of its own: Ansible, parallel-ssh and the OpenSSH client on real
sshd hosts (tests/fleet.py); one fleetsched measurement gives two rows: a first task on an
idle node, then a second task on the same hosts right after it (its pooled connections).
W2-W4 have one more fleetsched row, a diagnostic: the same worker with ``--no-recorder`` (what
the SQL recorder costs, in the same run; the default row is what operators run).
"""

from __future__ import annotations

from dataclasses import dataclass

FLEETSCHED = "fleetsched"
QUEUE_PEERS = ("rq", "celery", "arq", "dramatiq", "huey")  # W1-W4
SSH_PEERS = ("ansible", "parallel-ssh", "openssh")  # W5


@dataclass(frozen=True)
class Sizes:
    accept: int
    accept_sample: int  # one-host fleetsched tasks timed in W1
    drain: int
    lateness: int
    fairness: int
    fanout: int  # sshd hosts in W5
    runs: int


SIZES = {
    "full": Sizes(accept=10_000, accept_sample=500, drain=10_000, lateness=200, fairness=2_000,
                  fanout=100, runs=3),
    "quick": Sizes(accept=10_000, accept_sample=100, drain=2_000, lateness=100, fairness=300,
                   fanout=20, runs=1),
    "smoke": Sizes(accept=50, accept_sample=5, drain=50, lateness=5, fairness=20, fanout=4,
                   runs=1),
}


@dataclass(frozen=True)
class Measure:
    key: str  # in the driver's JSON
    label: str
    higher_is_better: bool
    fmt: str = "{:,.0f}"
    ratio: bool = True  # show fleetsched's figure as a ratio to the best peer's (or ratio_to)


@dataclass(frozen=True)
class Workload:
    code: str  # W1 ...
    name: str  # the driver's workload
    title: str
    measures: tuple[Measure, ...]
    peers: tuple[str, ...] = QUEUE_PEERS
    ratio_to: tuple[str, ...] = ()  # fleetsched's ratios to these rows instead of the best peer


WORKLOADS = {
    "W1": Workload("W1", "accept", "accept N jobs due in an hour (submission only)", (
        Measure("jobs_per_s", "jobs/s", True),
        Measure("ms_per_call", "ms per call", False, "{:,.2f}", ratio=False))),
    "W2": Workload("W2", "drain", "drain N due no-op jobs, one worker with its defaults", (
        Measure("start_to_last_s", "start to last done s", False, "{:,.2f}"),
        Measure("startup_s", "start to first done s", False, "{:,.2f}"),
        Measure("jobs_per_s_from_start", "jobs/s from start", True),
        Measure("drain_jobs_per_s", "drain rate jobs/s", True))),
    "W3": Workload("W3", "lateness", "start lateness, N jobs 50 ms apart from 2 s, idle worker", (
        Measure("p50_ms", "p50 ms", False, "{:,.1f}"),
        Measure("p95_ms", "p95 ms", False, "{:,.1f}"),
        Measure("p99_ms", "p99 ms", False, "{:,.1f}"),
        Measure("max_ms", "max ms", False, "{:,.1f}"),
        Measure("early", "early", False, ratio=False))),
    "W4": Workload("W4", "fairness", "fairness: N jobs of A (5 ms) then 4 of B, 4 slots", (
        Measure("b_over_a", "B/A", False, "{:,.3f}"),
        Measure("a_jobs_per_s", "A jobs/s", True),
        Measure("a_s", "A s", False, "{:,.2f}"),
        Measure("b_s", "B s", False, "{:,.2f}"))),
    "W5": Workload("W5", "fanout", "SSH fan-out: `true` on N sshd hosts, 50 at once", (
        Measure("seconds", "start to last host done s", False, "{:,.2f}"),
        Measure("ack_s", "to last ack in Redis s", False, "{:,.2f}", ratio=False),
        Measure("cli_s", "to submit's exit s", False, "{:,.2f}", ratio=False),
        Measure("ok", "hosts ok", True, ratio=False)),
        peers=SSH_PEERS, ratio_to=("openssh", "ansible")),
}


@dataclass(frozen=True)
class Plan:
    """One row of a table: the driver arguments that measure it."""

    workload: str  # W1 ...
    system: str
    row: str  # what the table calls it
    args: tuple[str, ...]
    part: str | None = None  # this row is this part of the driver's JSON (one call, many rows)


def plans(codes: list[str], systems: list[str], sizes: Sizes) -> list[Plan]:
    out = []
    for code in codes:
        w = WORKLOADS[code]
        for system in systems:
            if system != FLEETSCHED and system not in w.peers:
                continue
            if code == "W5":
                n = str(sizes.fanout)
                if system == FLEETSCHED:
                    out += [Plan(code, system, f"{system} (first task, idle node)",
                                 ("fanout", "--n", n), "first"),
                            Plan(code, system, f"{system} (second task right after, pooled)",
                                 ("fanout", "--n", n), "second")]
                else:
                    out.append(Plan(code, system, system, ("fanout", "--n", n)))
                continue
            if code == "W1":
                if system == FLEETSCHED:
                    n, hosts = str(sizes.accept), f"{sizes.accept:,}"
                    out += [Plan(code, system, f"{system} (one {hosts}-host task, library)",
                                 ("accept", "--n", n, "--variant", "bulk")),
                            Plan(code, system, f"{system} (one {hosts}-host task, CLI)",
                                 ("accept", "--n", n, "--variant", "cli")),
                            Plan(code, system,
                                 f"{system} (one-host tasks, {sizes.accept_sample} of {hosts})",
                                 ("accept", "--n", n, "--variant", "each",
                                  "--sample", str(sizes.accept_sample)))]
                else:
                    out.append(Plan(code, system, system,
                                    ("accept", "--n", str(sizes.accept))))
                continue
            n = {"W2": sizes.drain, "W3": sizes.lateness, "W4": sizes.fairness}[code]
            out.append(Plan(code, system, system, (w.name, "--n", str(n))))
            if system == FLEETSCHED:  # what the SQL recorder costs, measured in the same run
                out.append(Plan(code, system, f"{system} (diagnostic: --no-recorder)",
                                (w.name, "--n", str(n), "--variant", "no-recorder")))
    return out
