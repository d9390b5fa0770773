"""The audit report in the web console (``scheduler.server.console.audit``) on a real server:
its filters, a page of jobs, and CSV and JSON downloads that hold what ``fleetsched report``
writes for the same filters; who may read it. Its tests only read: they share the module's
server (tests/server/console/conftest.py) and the tasks reported on it."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from tests.server.conftest import Api
from tests.server.console.conftest import Console


@pytest.fixture(scope="module")
def reported(shared_console: tuple[Api, Path],
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """On the module's server, three tasks waiting an hour: olga's on the five web hosts and
    on 120 bulk hosts, bob's on two web hosts, cancelled."""
    tmp_path = tmp_path_factory.mktemp("reported")
    (tmp_path / "bulk.ini").write_text("[bulk]\n" + "".join(f"bulk-{n:03}\n"
                                                            for n in range(1, 121)))
    cli = shared_console[0].cli
    cli.ok("hosts", "import", str(tmp_path / "bulk.ini"))
    later = ["-p", "cmd=true", "--executor", "simulate", "--in", "1h"]
    tasks = {"web": cli.submit("command", "-t", "group:web", *later, operator="olga"),
             "bulk": cli.submit("command", "-t", "group:bulk", *later, operator="olga"),
             "bob": cli.submit("command", "-t", "web-01,web-02", *later, operator="bob")}
    cli.ok("tasks", "cancel", str(tasks["bob"]))
    return tasks


def _jobs(page: str) -> list[str]:
    return re.findall(r'<td><a href="/ui/jobs/([^"]+)">', page)


def _cli_report(console: Console, fmt: str, *filters: str) -> str:
    return console.api.cli.ok("report", *filters, "-o", fmt)


def test_the_report_filters_and_pages_its_jobs(console: Console,
                                               reported: dict[str, int]) -> None:
    viewer = console.as_role("viewer")
    page = viewer.get("/ui/audit")
    assert page.status_code == 200, page.text[:500]
    assert "<dt>jobs</dt><dd>127</dd>" in page.text
    # A page holds 100 jobs; the next one the other 27
    assert len(_jobs(page.text)) == 100
    assert 'href="/ui/audit?offset=100" rel="next"' in page.text
    assert len(_jobs(viewer.get("/ui/audit", params={"offset": "100"}).text)) == 27
    # The filters: operator, state, task, host, group, action, time; kept in the form
    by_bob = viewer.get("/ui/audit", params={"operator": "bob"}).text
    assert sorted(_jobs(by_bob)) == [f"{reported['bob']}.0", f"{reported['bob']}.1"]
    assert 'name="operator" value="bob"' in by_bob
    cancelled = viewer.get("/ui/audit", params={"state": "cancelled"}).text
    assert len(_jobs(cancelled)) == 2 and '<option value="cancelled" selected>' in cancelled
    assert len(_jobs(viewer.get("/ui/audit", params={"task": reported["web"]}).text)) == 5
    on_web_01 = viewer.get("/ui/audit", params={"host": "web-01"}).text
    assert sorted(_jobs(on_web_01)) == [f"{reported['web']}.0", f"{reported['bob']}.0"]
    assert len(_jobs(viewer.get("/ui/audit", params={"group": "web", "operator": "olga"})
                     .text)) == 5
    assert len(_jobs(viewer.get("/ui/audit", params={"action": "copy"}).text)) == 0
    assert "<dt>jobs</dt><dd>0</dd>" in viewer.get("/ui/audit", params={"until": "1d"}).text
    narrowed = viewer.get("/ui/audit", params={"since": "1d", "operator": "olga"})
    assert 'href="/ui/audit?offset=100&amp;since=1d&amp;operator=olga" rel="next"' in \
        narrowed.text
    # Bad filters: one line, 400, no traceback
    for params, line in (({"state": "nope"}, "--state &#39;nope&#39; is not a job state"),
                         ({"task": "abc"}, "task &#39;abc&#39; is not a task id"),
                         ({"since": "yesterday-ish"}, "since")):
        bad = viewer.get("/ui/audit", params=params)
        assert bad.status_code == 400 and line in bad.text, bad.text[-1500:]
        assert len(re.findall(r'role="alert"', bad.text)) == 1 and "Traceback" not in bad.text


@pytest.mark.parametrize("filters", [{}, {"operator": "olga", "group": "web"},
                                     {"state": "cancelled"}, {"host": "web-01", "since": "1d"}])
def test_the_downloads_hold_what_fleetsched_report_writes_for_the_same_filters(
        console: Console, reported: dict[str, int], filters: dict[str, str]) -> None:
    viewer = console.as_role("viewer")
    flags = [f"--{k}={v}" for k, v in filters.items()]
    # CSV: the same rows as `fleetsched report -o csv`
    got = viewer.get("/ui/audit.csv", params=filters)
    assert got.status_code == 200, got.text[:500]
    assert got.headers["content-disposition"] == \
        'attachment; filename="fleetsched-report.csv"'
    assert got.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(got.text)))
    assert rows == list(csv.reader(io.StringIO(_cli_report(console, "csv", *flags))))
    assert len(rows) > 1 or filters  # the unfiltered report holds jobs
    # JSON: the same report as `fleetsched report -o json`, but for when it was made
    got = viewer.get("/ui/audit.json", params=filters)
    assert got.status_code == 200 and got.headers["content-disposition"] == \
        'attachment; filename="fleetsched-report.json"'
    ours, theirs = got.json(), json.loads(_cli_report(console, "json", *flags))
    assert ours.pop("generated_at") and theirs.pop("generated_at")
    # A time "1d" ago is read when each asks: the same filters, at its own moment
    shown, asked = ours.pop("filters"), theirs.pop("filters")
    assert shown.keys() == asked.keys() == filters.keys()
    assert {k: v for k, v in shown.items() if k != "since"} == \
        {k: v for k, v in asked.items() if k != "since"}
    assert ours == theirs
    assert len(ours["jobs"]) == len(rows) - 1


def test_viewers_read_the_audit_and_customers_may_not(console: Console,
                                                      reported: dict[str, int]) -> None:
    for role in ("viewer", "operator", "admin"):
        assert console.as_role(role).get("/ui/audit").status_code == 200, role
    for role in ("customer-viewer", "customer-approver"):
        customer = console.as_role(role, tenant="acme")
        for path in ("/ui/audit", "/ui/audit.csv", "/ui/audit.json"):
            reply = customer.get(path)
            assert reply.status_code == 403, (role, path)
            assert "bulk-001" not in reply.text and "olga" not in reply.text
        assert 'href="/ui/audit"' not in customer.get("/ui/hosts").text
