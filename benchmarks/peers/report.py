"""The tables: per workload, one row per system, each measure as the median of the runs with
[min-max] when there were several; every fleetsched figure also as a ratio to the best peer's
median of the same run (``x`` = fleetsched / best peer, so above 1 is more for a rate and
slower for a time), or, where the workload names them (W5: the OpenSSH floor and Ansible), to
those rows'. A measure a system does not have is ``-``. Markdown, so a table can be pasted into
docs/benchmarks.md as printed.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.peers.workloads import FLEETSCHED, WORKLOADS, Measure


def summarize(samples: list[dict[str, Any]], key: str) -> tuple[float, float, float] | None:
    values = [s[key] for s in samples if s.get(key) is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def cell(stat: tuple[float, float, float] | None, m: Measure, runs: int) -> str:
    if stat is None:
        return "-" if runs else "failed"
    med, lo, hi = stat
    text = m.fmt.format(med)
    if runs > 1:
        text += f" [{m.fmt.format(lo)}-{m.fmt.format(hi)}]"
    return text


def best_peer(rows: dict[str, dict[str, Any]], m: Measure) -> tuple[str, float] | None:
    cands = [(name, stat[0]) for name, r in rows.items()
             if r["system"] != FLEETSCHED and (stat := summarize(r["samples"], m.key))]
    if not cands:
        return None
    pick = max if m.higher_is_better else min
    return pick(cands, key=lambda c: c[1])


def ratio_text(ratio: float, name: str) -> str:
    return f"{ratio:.2f}x {name}" if ratio >= 0.1 else f"{ratio:.2g}x {name}"


def references(rows: dict[str, dict[str, Any]], m: Measure, names: tuple[str, ...]
               ) -> list[tuple[str, float]]:
    """The workload's named rows' medians of ``m`` (those that have one)."""
    return [(name, stat[0]) for name in names if name in rows
            and (stat := summarize(rows[name]["samples"], m.key)) and stat[0]]


def table(code: str, rows: dict[str, dict[str, Any]], size: str) -> str:
    """rows: {row name: {"system": ..., "samples": [driver JSON, ...]}} in display order."""
    w = WORKLOADS[code]
    heads = ["system", *[m.label + (" ↑" if m.higher_is_better else " ↓") for m in w.measures]]
    lines = [f"{code} {w.title.replace('N', size, 1)}", "",
             "| " + " | ".join(heads) + " |",
             "| --- |" + " ---: |" * len(w.measures)]
    bests = {m.key: references(rows, m, w.ratio_to) if w.ratio_to
             else [b] if (b := best_peer(rows, m)) and b[1] else [] for m in w.measures}
    for name, r in rows.items():
        cells = [name]
        runs = len(r["samples"])
        for m in w.measures:
            stat = summarize(r["samples"], m.key)
            text = cell(stat, m, runs)
            if r["system"] == FLEETSCHED and m.ratio and stat and bests[m.key]:
                text += " (" + ", ".join(ratio_text(stat[0] / value, peer)
                                         for peer, value in bests[m.key]) + ")"
            cells.append(text)
        if r.get("error"):
            cells[0] += f" (error: {r['error']})"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
