"""A report as one self-contained HTML file: inline CSS and SVG, no script, no external asset.

Charts: jobs over time by outcome (stacked bars), the distribution of job durations (a
histogram), and failures by host (the hosts with the most failed or lost jobs). Then the
per-task summary, the failed and lost jobs with their errors, and the jobs themselves (the
first :data:`JOB_ROWS_MAX`; the CSV form has all of them).

Every string that comes from the record (host names, errors, operators, task names, filters)
passes through :func:`esc` (``html.escape`` with quotes, control characters shown as ``cat -v``
shows them: ``scheduler.visible``), in text and in attributes alike.
"""

from __future__ import annotations

import html
from collections import Counter
from datetime import datetime
from typing import Any

from scheduler.reports.query import JOB_COLUMNS, OUTCOMES, Report, totals_text
from scheduler.reports.text import FAILURE_COLUMNS, SUMMARY_COLUMNS, summary_rows
from scheduler.visible import visible

JOB_ROWS_MAX = 10_000
FAILURE_ROWS_MAX = 5_000
TIME_BUCKETS = 48
DURATION_BINS = 30
TOP_HOSTS = 20
COLORS = {"succeeded": "#2e7d32", "failed": "#c62828", "lost": "#ef6c00", "cancelled": "#9e9e9e"}
W, H, PAD = 760, 220, 40  # chart size and left/bottom padding, px

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.err{max-width:480px;overflow-wrap:anywhere}
.note{color:#666}.legend span{display:inline-block;margin-right:1em}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
svg text{font:11px sans-serif;fill:#444}
"""


def esc(value: Any) -> str:
    """Text safe in HTML/SVG content and in quoted attributes, control characters shown."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        value = value.strftime("%Y-%m-%d %H:%M:%S")
    return html.escape(visible(str(value)), quote=True)


def _svg(body: list[str], title: str, height: int = H) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
            f'viewBox="0 0 {W} {height}" role="img" aria-label="{esc(title)}">'
            f"<title>{esc(title)}</title>{''.join(body)}</svg>")


def _axes(body: list[str], top: int, left_label: str, right_label: str) -> None:
    body.append(f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#888"/>')
    body.append(f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{H - PAD}" stroke="#888"/>')
    body.append(f'<text x="{PAD - 4}" y="16" text-anchor="end">{top}</text>')
    body.append(f'<text x="{PAD - 4}" y="{H - PAD}" text-anchor="end">0</text>')
    body.append(f'<text x="{PAD}" y="{H - PAD + 16}">{esc(left_label)}</text>')
    body.append(f'<text x="{W - 10}" y="{H - PAD + 16}" text-anchor="end">{esc(right_label)}</text>')


def jobs_over_time(report: Report) -> str:
    """Finished jobs per time bucket, stacked by outcome."""
    done = [(j["finished"], j["state"]) for j in report.jobs
            if j["finished"] is not None and j["state"] in OUTCOMES]
    if not done:
        return '<p class="note">No finished jobs.</p>'
    t0 = min(t for t, _ in done).timestamp()
    t1 = max(t for t, _ in done).timestamp()
    span = max(t1 - t0, 1e-3)
    buckets = [Counter() for _ in range(TIME_BUCKETS)]
    for t, state in done:
        buckets[min(int((t.timestamp() - t0) / span * TIME_BUCKETS), TIME_BUCKETS - 1)][state] += 1
    top = max(sum(b.values()) for b in buckets)
    bw = (W - PAD - 10) / TIME_BUCKETS
    body: list[str] = []
    for i, b in enumerate(buckets):
        y = H - PAD
        for state in OUTCOMES:
            n = b.get(state, 0)
            if not n:
                continue
            h = n / top * (H - PAD - 10)
            y -= h
            body.append(f'<rect x="{PAD + i * bw + 1:.1f}" y="{y:.1f}" width="{bw - 2:.1f}" '
                        f'height="{h:.1f}" fill="{COLORS[state]}"><title>{n} {state}</title></rect>')
    first, last = min(t for t, _ in done), max(t for t, _ in done)
    _axes(body, top, f"{esc(first)} UTC", f"{esc(last)} UTC")
    legend = "".join(f'<span><i style="background:{COLORS[s]}"></i>{s}</span>' for s in OUTCOMES)
    return _svg(body, "jobs over time by outcome") + f'<div class="legend">{legend}</div>'


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3g}s"


def duration_histogram(report: Report) -> str:
    """How long jobs took: bins from 0 to the 99th percentile, the rest in the last bin."""
    durations = sorted(j["duration_ms"] for j in report.jobs if j["duration_ms"] is not None)
    if not durations:
        return '<p class="note">No durations recorded.</p>'
    cap = max(durations[min(len(durations) - 1, int(len(durations) * 0.99))], 1)
    bins = [0] * DURATION_BINS
    for d in durations:
        bins[min(int(d / cap * DURATION_BINS), DURATION_BINS - 1)] += 1
    top = max(bins)
    bw = (W - PAD - 10) / DURATION_BINS
    body: list[str] = []
    for i, n in enumerate(bins):
        if n:
            h = n / top * (H - PAD - 10)
            lo, hi = i * cap / DURATION_BINS, (i + 1) * cap / DURATION_BINS
            label = f"{_seconds(lo)}-{_seconds(hi) if i < DURATION_BINS - 1 else 'more'}"
            body.append(f'<rect x="{PAD + i * bw + 1:.1f}" y="{H - PAD - h:.1f}" '
                        f'width="{bw - 2:.1f}" height="{h:.1f}" fill="#1565c0">'
                        f"<title>{n} job(s), {label}</title></rect>")
    _axes(body, top, "0s", f"{_seconds(cap)} and more")
    median = durations[len(durations) // 2]
    return (_svg(body, "job duration distribution")
            + f'<p class="note">median {_seconds(median)}, 99th percentile {_seconds(cap)}, '
              f"longest {_seconds(durations[-1])}</p>")


def failures_by_host(report: Report) -> str:
    """The hosts with the most failed or lost jobs, as horizontal bars."""
    counts = Counter(j["host"] for j in report.failures)
    if not counts:
        return '<p class="note">No failed or lost jobs.</p>'
    rows = counts.most_common(TOP_HOSTS)
    top = rows[0][1]
    label_w, row_h = 200, 18
    height = row_h * len(rows) + 10
    body: list[str] = []
    for i, (host, n) in enumerate(rows):
        y = 5 + i * row_h
        w = n / top * (W - label_w - 60)
        body.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{esc(host[:40])}</text>')
        body.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" '
                    f'fill="{COLORS["failed"]}"><title>{esc(host)}: {n}</title></rect>')
        body.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 12}">{n}</text>')
    more = len(counts) - len(rows)
    note = f'<p class="note">{more} more host(s) with failures.</p>' if more > 0 else ""
    return _svg(body, "failures by host", height) + note


def _table(rows: list[dict[str, Any]], columns: list[str], err: str = "error") -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    lines = [f"<table><thead><tr>{head}</tr></thead><tbody>"]
    for r in rows:
        cells = "".join(f'<td class="err">{esc(r.get(c))}</td>' if c == err else
                        f"<td>{esc(r.get(c))}</td>" for c in columns)
        lines.append(f"<tr>{cells}</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def render_html(report: Report) -> str:
    """The whole report as one HTML document (see the module docstring)."""
    t = report.totals
    filters = report.filters.as_dict()
    filter_text = ", ".join(f"{k} = {esc(v)}" for k, v in filters.items()) or "none"
    totals = totals_text(t)
    failures = report.failures
    jobs = report.jobs[:JOB_ROWS_MAX]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">",
        f"<title>fleetsched report {esc(report.generated_at)}</title><style>{CSS}</style></head>",
        "<body><h1>fleetsched job report</h1>",
        f"<p>Generated {esc(report.generated_at)} UTC. Filters: {filter_text}.</p>",
        f"<p><b>{t.get('jobs', 0)}</b> job(s) in {len(report.tasks)} task(s): {totals}.</p>",
        f'<p class="note">Note: {esc(report.note)}.</p>' if report.note else "",
        "<h2>Jobs over time by outcome</h2>", jobs_over_time(report),
        "<h2>Duration distribution</h2>", duration_histogram(report),
        "<h2>Failures by host</h2>", failures_by_host(report),
        "<h2>Tasks</h2>", _table(summary_rows(report), SUMMARY_COLUMNS),
        f"<h2>Jobs that failed an attempt or were lost ({len(failures)})</h2>",
        _table(failures[:FAILURE_ROWS_MAX], FAILURE_COLUMNS) if failures else
        '<p class="note">None.</p>',
    ]
    if len(failures) > FAILURE_ROWS_MAX:
        parts.append(f'<p class="note">First {FAILURE_ROWS_MAX} of {len(failures)}.</p>')
    parts += [f"<h2>Jobs ({len(report.jobs)})</h2>",
              _table(jobs, [c for c in JOB_COLUMNS if c != "time"])]
    if len(report.jobs) > JOB_ROWS_MAX:
        parts.append(f'<p class="note">First {JOB_ROWS_MAX} of {len(report.jobs)} jobs; '
                     "fleetsched report --output csv lists them all.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


__all__ = ["render_html", "esc", "jobs_over_time", "duration_histogram", "failures_by_host"]
