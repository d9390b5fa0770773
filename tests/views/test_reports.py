"""``fleetsched report``: filters, table/JSON/CSV/HTML forms, escaping of host-provided text,
atomic HTML writes; on SQLite and PostgreSQL, with records generated straight into SQL."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
import sqlalchemy as sa

from scheduler.record.engine import make_engine
from scheduler.record.migrate import upgrade
from scheduler.record.models import Group, Host, Job, Task, group_hosts
from tests.cli_support import isolated_env, run_cli
from tests.report_rows import START, insert_jobs


class Tags(HTMLParser):
    """Every element name and attribute name of a document (escaped text is not a tag)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.names.add(tag)
        self.attrs |= {name for name, _ in attrs}


HOSTILE_HOST = 'web-"07"&<u>'
HOSTILE_ERROR = "<script>alert(1)</script> <img src=x onerror=alert(2)> & 'quotes'"


@pytest.fixture
def record(database_url: str) -> str:
    """6 tasks x 40 jobs over 20 hosts (some failed, one with hostile text); hosts 0-4 in
    group 'edge'."""
    upgrade(database_url)
    engine = make_engine(database_url)
    insert_jobs(engine, tasks=6, jobs_per_task=40, hosts=20, fail_rate=0.1,
                errors=("exit status 1", HOSTILE_ERROR))
    with engine.begin() as conn:
        conn.execute(sa.update(Job.__table__).where(Job.id == "1.0")
                     .values(host=HOSTILE_HOST, state="failed", error=HOSTILE_ERROR))
        conn.execute(sa.insert(Host.__table__), [{"id": i + 1, "name": f"host-{i:05d}"}
                                                 for i in range(20)])
        conn.execute(sa.insert(Group.__table__), [{"id": 1, "name": "edge"}])
        conn.execute(sa.insert(group_hosts), [{"group_id": 1, "host_id": i + 1} for i in range(5)])
    engine.dispose()
    return database_url


def jobs_in(url: str, where=None) -> set[str]:
    engine = make_engine(url)
    stmt = sa.select(Job.id).join(Task, Task.id == Job.task_id)
    if where is not None:
        stmt = stmt.where(where)
    with engine.connect() as conn:
        found = set(conn.execute(stmt).scalars())
    engine.dispose()
    return found


def report(tmp_path: Path, url: str, *args: str) -> tuple[int, str, str]:
    code, out, err = run_cli(["--database-url", url, "report", *args], isolated_env(tmp_path))
    assert "Traceback" not in err
    return code, out, err


def report_json(tmp_path: Path, url: str, *args: str) -> dict:
    code, out, err = report(tmp_path, url, *args, "--output", "json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("args, where", [
    ((), None),
    (("--task", "3"), Job.task_id == 3),
    (("--host", "host-00004"), Job.host == "host-00004"),
    (("--state", "failed"), Job.state == "failed"),
    (("--action", "firmware"), Task.action == "firmware"),
    (("--operator", "bob"), Task.operator == "bob"),
    (("--group", "edge"), Job.host.in_([f"host-{i:05d}" for i in range(5)])),
    (("--operator", "alice", "--state", "succeeded"),
     sa.and_(Task.operator == "alice", Job.state == "succeeded")),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_each_filter_selects_exactly_the_matching_jobs(tmp_path: Path, record: str, args, where) -> None:
    data = report_json(tmp_path, record, *args)
    expected = jobs_in(record, where)
    assert expected, "the generated record must have jobs for this filter"
    assert {j["job"] for j in data["jobs"]} == expected
    assert data["totals"]["jobs"] == len(expected)
    assert sum(t["jobs"] for t in data["tasks"]) == len(expected)


def test_since_and_until_bound_the_jobs_by_finish_time(tmp_path: Path, record: str) -> None:
    since, until = START + timedelta(minutes=40), START + timedelta(minutes=70)
    data = report_json(tmp_path, record, "--since", since.isoformat(), "--until", until.isoformat())
    expected = jobs_in(record, sa.and_(Job.finished_at >= since, Job.finished_at < until))
    assert expected and {j["job"] for j in data["jobs"]} == expected


def test_csv_has_a_header_and_one_row_per_job(tmp_path: Path, record: str) -> None:
    code, out, _ = report(tmp_path, record, "--output", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0
    assert len(rows) == len(jobs_in(record))
    hostile = [r for r in rows if r["job"] == "1.0"][0]
    assert hostile["host"] == HOSTILE_HOST and hostile["error"] == HOSTILE_ERROR


def test_table_shows_the_task_summary_and_the_failures(tmp_path: Path, record: str) -> None:
    code, out, _ = report(tmp_path, record, "--task", "1")
    assert code == 0
    assert out.startswith("40 job(s) in 1 task(s)")
    assert "Jobs that failed an attempt or were lost" in out and HOSTILE_HOST in out


def test_html_is_self_contained_and_escapes_every_host_provided_string(tmp_path: Path, record: str) -> None:
    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    code, out, err = report(tmp_path, record, "--html", str(target))
    assert code == 0, err
    assert out == ""  # the file is the output; the message goes to stderr
    text = target.read_text()
    # Nothing fetched from elsewhere, nothing executed: no such element or attribute anywhere
    tags = Tags()
    tags.feed(text)
    assert {"html", "svg", "rect", "table", "style"} <= tags.names
    assert not tags.names & {"script", "link", "iframe", "img", "object", "embed"}
    assert not {a for a in tags.attrs if a in ("src", "href") or a.startswith("on")}
    assert not re.search(r"@import|url\(", text, re.I)
    assert "Content-Security-Policy" in text
    # Host-provided strings appear only escaped
    assert HOSTILE_ERROR not in text and "<u>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "web-&quot;07&quot;&amp;&lt;u&gt;" in text
    # The three charts are valid SVG documents
    svgs = re.findall(r"<svg.*?</svg>", text, re.S)
    assert len(svgs) == 3
    for svg in svgs:
        ET.fromstring(svg)
    assert "failures by host" in text and "<rect" in text


def test_a_failed_html_write_leaves_nothing_behind(tmp_path: Path, record: str) -> None:
    code, _out, err = report(tmp_path, record, "--html", str(tmp_path / "no-such-dir" / "r.html"))
    assert code == 2
    assert err.startswith("error: --html")
    assert not (tmp_path / "no-such-dir").exists()
    # A directory is refused too, and nothing is written into it
    code, _out, err = report(tmp_path, record, "--html", str(tmp_path))
    assert code == 2 and "is a directory" in err
    assert not list(tmp_path.glob(".report-*"))


@pytest.mark.parametrize("args, code, words", [
    (("--since", "last tuesday"), 2, "--since"),
    (("--until", "soon"), 2, "--until"),
    (("--state", "exploded"), 2, "job state"),
    (("--since", "2026-12-02", "--until", "2026-12-01"), 2, "earlier"),
    (("--group", "no-such-group"), 4, "no group"),
    (("--task", "0"), 2, "--task"),
])
def test_bad_filters_are_one_line_with_a_documented_exit_code(tmp_path: Path, record: str, args,
                                                              code: int, words: str) -> None:
    got, out, err = report(tmp_path, record, *args)
    assert got == code
    assert out == ""
    assert err.splitlines()[0].startswith("error: ") and words in err.splitlines()[0]


def test_a_text_report_cell_that_is_cut_says_so() -> None:
    from scheduler.reports.text import _aligned

    out = io.StringIO()
    _aligned(out, [{"policy": "x" * 50, "params": "short"}], ["policy", "params"], width=20)
    row = out.getvalue().splitlines()[1]
    assert row.startswith("x" * 17 + "...  short")
