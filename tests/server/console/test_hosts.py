"""The host search and a host's page in the web console (``scheduler.server.console.hosts``)
on a real server: by name, group and variable, paged; a host's variables, windows and history
linked to its tasks and jobs; a customer sees its own hosts only. The tests share the module's
server (tests/server/console/conftest.py); only the history's test runs tasks there."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.server.conftest import Api, worker_nodes
from tests.server.console.conftest import Console
from tests.submit_support import Cli
from tests.tenants_support import customers_ini


def _import(cli: Cli, tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    cli.ok("hosts", "import", str(tmp_path / name))


def _names(page: str) -> list[str]:
    """The host names a list page links to, in order."""
    return re.findall(r'<td><a href="/ui/hosts/([^"?]+)">', page)


@pytest.fixture(scope="module")
def hosts(shared_console: tuple[Api, Path], tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the module's server: the five web hosts, three db hosts with variables, 120 bulk
    hosts, and two customers'."""
    cli, tmp_path = shared_console[0].cli, tmp_path_factory.mktemp("hosts")
    _import(cli, tmp_path, "db.ini",
            "[db]\ndb-01 rack=r1 role=primary\ndb-02 rack=r2 role=replica\n"
            "db-03 rack=r1 role=replica ansible_port=2222\n[db:vars]\nansible_user=postgres\n")
    _import(cli, tmp_path, "bulk.ini",
            "[bulk]\n" + "".join(f"bulk-{n:03}\n" for n in range(1, 121)))
    _import(cli, tmp_path, "customers.ini",
            customers_ini(acme=("acme-01", "acme-02"), globex=("globex-01",)))


@pytest.fixture
def fleet(console: Console, hosts: None) -> Console:
    """The console of the module's server, with those hosts."""
    return console


def test_hosts_are_found_by_name_group_and_variable(fleet: Console) -> None:
    viewer = fleet.as_role("viewer")

    def found(**params: str | list[str]) -> list[str]:
        reply = viewer.get("/ui/hosts", params=params)
        assert reply.status_code == 200, reply.text[:500]
        return _names(reply.text)

    assert found(match="web-0[12]") == ["web-01", "web-02"]
    assert found(match="db-*") == ["db-01", "db-02", "db-03"]
    assert found(group="db") == ["db-01", "db-02", "db-03"]
    # A variable, in SQL: key=value, several at once, with a name pattern and a group
    assert found(var="rack=r1") == ["db-01", "db-03"]
    assert found(var=["rack=r1", "role=replica"]) == ["db-03"]
    assert found(var="role=replica", match="db-0[23]", group="db") == ["db-02", "db-03"]
    assert found(var="rack=r9") == []
    # Bad search input: one line, 400; an unknown group: 404
    bad = viewer.get("/ui/hosts", params={"var": "rack"})
    assert bad.status_code == 400 and "var &#39;rack&#39; is not NAME=VALUE" in bad.text
    assert viewer.get("/ui/hosts", params={"var": "no such=x"}).status_code == 400
    missing = viewer.get("/ui/hosts", params={"group": "nope"})
    assert missing.status_code == 404 and "no group named &#39;nope&#39;" in missing.text
    # The search is kept in the form
    assert 'name="var" value="rack=r1"' in viewer.get("/ui/hosts?var=rack%3Dr1").text


def test_the_host_list_pages_a_hundred_hosts_keeping_its_filters(fleet: Console) -> None:
    viewer = fleet.as_role("viewer")
    first = viewer.get("/ui/hosts", params={"group": "bulk"})
    assert _names(first.text) == [f"bulk-{n:03}" for n in range(1, 101)]
    assert 'href="/ui/hosts?offset=100&amp;group=bulk" rel="next"' in first.text
    second = viewer.get("/ui/hosts", params={"group": "bulk", "offset": "100"})
    assert _names(second.text) == [f"bulk-{n:03}" for n in range(101, 121)]
    assert 'rel="next"' not in second.text and 'rel="prev"' in second.text
    # Every host, paged the same way: 5 + 3 + 120 + 3 = 131
    everyone = viewer.get("/ui/hosts", params={"offset": "100"})
    assert len(_names(everyone.text)) == 31


def test_a_host_page_shows_how_it_is_reached_its_variables_and_windows(
        fleet: Console) -> None:
    fleet.api.cli.ok("windows", "add", "sun-night", "--rrule", "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1",
                     "--duration", "3h")
    fleet.api.cli.ok("windows", "assign", "sun-night", "--group", "db")
    viewer = fleet.as_role("viewer")
    page = viewer.get("/ui/hosts/db-03")
    assert page.status_code == 200, page.text[:500]
    text = page.text
    assert "<h1>Host db-03</h1>" in text
    assert '<th scope="row">port</th><td>2222</td>' in text
    assert 'href="/ui/hosts?group=db">db</a>' in text
    assert "<code>replica</code>" in text and "<code>r1</code>" in text
    assert "<td>sun-night</td><td>window</td><td>group:db</td>" in text
    assert viewer.get("/ui/hosts/nope").status_code == 404


def test_a_customer_sees_its_own_hosts_only(fleet: Console) -> None:
    acme = fleet.as_role("customer-viewer", tenant="acme")
    listed = acme.get("/ui/hosts")
    assert listed.status_code == 200, listed.text[:500]
    assert _names(listed.text) == ["acme-01", "acme-02"]
    assert _names(acme.get("/ui/hosts", params={"match": "*"}).text) == ["acme-01", "acme-02"]
    assert acme.get("/ui/hosts", params={"group": "globex"}).status_code == 404
    assert acme.get("/ui/hosts/acme-01").status_code == 200
    # Another customer's host, or the team's, is not found, as one that does not exist
    for other in ("globex-01", "web-01"):
        reply = acme.get(f"/ui/hosts/{other}")
        assert reply.status_code == 404 and f"no host named &#39;{other}&#39;" in reply.text
        assert reply.text.count(other) == 1  # the one line saying so, nothing of the host


@pytest.fixture
def worker(console: Console, tmp_path: Path) -> Iterator[Callable[[], None]]:
    """``start()`` starts a worker node on the console's deployment; stopped afterwards."""
    with worker_nodes(tmp_path, console.redis_url, console.api.database_url) as start:
        yield start


def test_a_host_page_shows_its_history_newest_first_linked_to_tasks_and_jobs(
        console: Console, worker: Callable[[], None]) -> None:
    # Given two tasks that ran on web-01
    worker()
    tasks = [console.api.cli.submit("command", "-t", "web-01,web-02", "-p", "cmd=true",
                                    "--executor", "simulate") for _ in range(2)]
    for task_id in tasks:
        assert console.api.cli("tasks", "wait", str(task_id), "--timeout", "90s")[0] == 0
    viewer = console.as_role("viewer")
    # The record follows the queue through the recorder: wait for both jobs' results there
    deadline = time.monotonic() + 90
    while True:
        page = viewer.get("/ui/hosts/web-01")
        assert page.status_code == 200, page.text[:500]
        if page.text.count("<td>ack</td>") >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # Then its history links to both tasks and to its job of each, the newest first
    linked = re.findall(r'href="/ui/tasks/(\d+)"', page.text)
    assert set(linked) == {str(t) for t in tasks}
    assert linked.index(str(tasks[1])) < linked.index(str(tasks[0]))
    jobs = re.findall(r'href="/ui/jobs/([^"]+)"', page.text)
    assert set(jobs) == {f"{t}.0" for t in tasks}  # web-01 is each task's first job
    assert "web-02" not in page.text  # its events only
    # And the page after the first event holds one event fewer
    events = page.text.count('<td><time datetime=')
    later = viewer.get("/ui/hosts/web-01", params={"offset": "1"})
    assert later.text.count('<td><time datetime=') == events - 1
