"""The CLI's administrative commands in remote mode behave as in direct mode: ``hosts import``,
``export``, ``add``, ``remove`` and ``check``, ``groups limit`` and ``remove``, ``tenants list``
and ``set``, ``tokens create``, ``list`` and ``revoke``. On one deployment (a real ``fleetsched
server``, redis-server, a SQLite record; tests/cli/remote_support.py) each change is made once
directly and once through the server, on names of its own (``d<tag>-...`` and
``r<tag>-...``, each test its own tag: the module's tests share the deployment), and the two
runs print the same stdout and stderr and exit the same once the names are made alike; their
errors are the same one line; the server records each remote change as the token's
(``principal.via``: ``token:<id>``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.remote_support import Deployment, deployment, normalised, one_line
from tests.servers import free_port
from tests.submit_support import data, sql_rows

__all__ = ["deployment"]  # the fixture, found by pytest here
# The module's deployment is made once, on the process that runs all of its tests.
pytestmark = pytest.mark.xdist_group("remote-mode-inventory")

Run = tuple[int, str, str]

INVENTORY = """\
[{p}-db]
{p}-db-01 ansible_host=10.0.0.1 ansible_user=ops
{p}-db-02 ansible_host=10.0.0.2 fleetsched_tenant={p}-acme
[{p}-db:vars]
ansible_password=hunter2
rack=r1
[{p}-all:children]
{p}-db
"""


def _token_id(deployment: Deployment, name: str = "remote-cli") -> int:
    [row] = sql_rows(deployment.api.database_url, "SELECT id FROM api_tokens WHERE name = :n",
                     n=name)
    return int(row.id)


def _both(deployment: Deployment, tag: str, *steps: list[str],
          alike: Callable[[str, str], str] = lambda mode, text: text) -> dict[str, list[Run]]:
    """Each step run directly on the ``d<tag>`` names and through the server on the
    ``r<tag>`` names (``{p}`` in a step), as (exit code, stdout, stderr) with the names made
    alike."""
    said: dict[str, list[Run]] = {}
    for mode in ("direct", "remote"):
        run = deployment.direct if mode == "direct" else deployment.remote
        p = f"{mode[0]}{tag}"
        said[mode] = []
        for step in steps:
            code, out, err = run(*[a.format(p=p) for a in step])
            said[mode].append((code, *(alike(mode, _timeless(normalised(t))).replace(
                f"{p}-", "P-") for t in (out, err))))
    return said


def _timeless(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", "T", text)


def _kinds_via(deployment: Deployment, kinds: tuple[str, ...],
               since: frozenset[str]) -> list[tuple[str, str, str]]:
    """(kind, operator, principal.via) of every event of ``kinds`` recorded after ``since``
    (``Deployment.mark``), oldest first."""
    rows = deployment.events_since(
        since, "SELECT id, kind, operator, data FROM events ORDER BY ts, id")
    return [(r.kind, r.operator, (data(r).get("principal") or {}).get("via"))
            for r in rows if r.kind in kinds]


def test_hosts_import_prints_the_same_in_both_modes_and_records_the_token(
        deployment: Deployment, tmp_path: Path) -> None:
    # Given the same inventory for each mode, on its own names, in a folder of its own
    files: dict[str, Path] = {}
    for p in ("dx", "rx"):
        (tmp_path / p).mkdir()
        files[p] = tmp_path / p / "cmdb.ini"
        files[p].write_text(INVENTORY.format(p=p))
        (tmp_path / p / "bad.ini").write_bytes(b"[db]\nx-01\x00\n")
        (tmp_path / p / "grown.ini").write_text(
            INVENTORY.format(p=p).replace("10.0.0.2 ", f"10.0.0.22\n{p}-db-03 "))

    def alike(mode: str, text: str) -> str:
        # the direct mode's source is the file as named; the server's, api:NAME
        return text.replace(str(tmp_path / f"{mode[0]}x") + "/", "").replace("api:", "")

    since = deployment.mark()
    said = _both(
        deployment, "x",
        ["hosts", "import", "--dry-run", str(tmp_path / "{p}" / "cmdb.ini")],
        ["hosts", "import", str(tmp_path / "{p}" / "cmdb.ini")],
        ["hosts", "import", str(tmp_path / "{p}" / "cmdb.ini"), "-o", "json"],
        ["hosts", "import", str(tmp_path / "{p}" / "grown.ini"), "-o", "csv"],
        # a prune of cmdb.ini: what it imported and grown.ini took over stays
        ["hosts", "import", "--prune", "--format", "ini", str(tmp_path / "{p}" / "cmdb.ini")],
        ["hosts", "import", "--format", "json", str(tmp_path / "{p}" / "cmdb.ini")],
        ["hosts", "import", str(tmp_path / "{p}" / "bad.ini")],
        ["hosts", "import", str(tmp_path / "{p}" / "missing.ini")],
        ["hosts", "import", "--format", "toml", str(tmp_path / "{p}" / "cmdb.ini")],
        ["hosts", "list", "--match", "{p}-*"],
        alike=alike)
    # Then each step prints the same, with the same exit code, in both modes
    assert said["direct"] == said["remote"]
    assert [code for code, _out, _err in said["remote"]] == [0, 0, 0, 0, 0, 2, 2, 2, 2, 0]
    assert "P-db-02" in said["remote"][0][1] and "skipped 1 secret" in said["remote"][0][2]
    imported = json.loads(said["remote"][2][1])
    assert imported["tenants"] == {"P-acme": 1} and imported["counts"]["unchanged"] == 2
    # And each error is one line, with its hint
    for code, _out, err in said["remote"][5:9]:
        one_line(err)
    # And the imports through the server are the token's, those at the shell tester's own
    imports = [via for kind, who, via in _kinds_via(deployment, ("import",), since)
               if who == "tester"]
    token = f"token:{_token_id(deployment)}"
    assert imports == ["local-cli"] * 4 + [token] * 4


def test_hosts_add_and_remove_print_the_same_in_both_modes(deployment: Deployment) -> None:
    since = deployment.mark()
    said = _both(
        deployment, "a",
        ["hosts", "add", "{p}-09", "--address", "10.1.1.9", "--port", "2222", "--user", "ops",
         "--group", "{p}-new", "--group", "web", "--var", "rack=r1", "--var", "u=[1, 2]"],
        ["hosts", "show", "{p}-09", "-o", "json"],
        ["hosts", "add", "{p}-09"],  # a second time
        ["hosts", "add", "{p}-10", "--var", "novalue"],
        ["hosts", "add", "{p}-1 1"],
        ["hosts", "add", "{p}-12", "--var", "ansible_password=x"],
        ["hosts", "remove", "{p}-09"],
        ["hosts", "remove", "{p}-09"],  # gone already
        ["hosts", "show", "{p}-09"])
    assert said["direct"] == said["remote"]
    assert [code for code, _out, _err in said["remote"]] == [0, 0, 2, 2, 2, 2, 0, 4, 4]
    assert said["remote"][0][2] == "created group(s) P-new\nadded host P-09\n"
    assert json.loads(said["remote"][1][1])["groups"] == ["P-new", "web"]
    for _code, _out, err in said["remote"][2:6] + said["remote"][7:]:
        one_line(err)
    token = f"token:{_token_id(deployment)}"
    assert _kinds_via(deployment, ("host-add", "host-remove"), since) == [
        ("host-add", "tester", "local-cli"), ("host-remove", "tester", "local-cli"),
        ("host-add", "tester", token), ("host-remove", "tester", token)]


def test_groups_limit_and_remove_print_the_same_in_both_modes(deployment: Deployment) -> None:
    for p in ("dg", "rg"):
        for n in (1, 2, 3):
            deployment.api.cli.ok("hosts", "add", f"{p}-g{n}", "--group", f"{p}-grp")
    since = deployment.mark()
    said = _both(
        deployment, "g",
        ["groups", "limit", "{p}-grp", "--max-busy", "1"],
        ["groups", "limit", "{p}-grp", "--max-busy", "50%"],
        ["groups", "limit", "{p}-grp", "--remove"],
        ["groups", "limit", "{p}-grp", "--max-busy", "sideways"],
        ["groups", "limit", "{p}-nope", "--max-busy", "1"],
        ["groups", "limit", "{p}-grp"],
        ["groups", "remove", "{p}-grp"],
        ["groups", "remove", "{p}-grp"])
    assert said["direct"] == said["remote"]
    assert [code for code, _out, _err in said["remote"]] == [0, 0, 0, 2, 4, 2, 0, 4]
    assert said["remote"][1][2] == ("group P-grp: at most 2 job(s) at once on its 3 hosts, "
                                    "across all tasks, by tester\n")
    assert said["remote"][6][2] == "removed group P-grp (3 hosts were in it; they stay)\n"
    token = f"token:{_token_id(deployment)}"
    assert [via for _k, _who, via in _kinds_via(deployment, ("group-limit", "group-remove"),
                                                 since)] == ["local-cli"] * 4 + [token] * 4


def test_hosts_export_and_check_print_the_same_in_both_modes(
        deployment: Deployment, tmp_path: Path) -> None:
    # Given three hosts where nothing listens: each check is refused at once
    closed = free_port()
    (tmp_path / "probes.ini").write_text("".join(
        f"probe-{n} ansible_host=127.0.0.1 ansible_port={closed}\n" for n in range(1, 4)))
    deployment.api.cli.ok("hosts", "import", str(tmp_path / "probes.ini"))
    deployment.api.cli.ok("groups", "limit", "web", "--max-busy", "2")
    lines = [["hosts", "export"], ["hosts", "export", "--format", "yaml", "group:web"],
             ["hosts", "export", "-f", "ansible-json", "web-0[12],probe-1"],
             ["hosts", "export", "nope-*"], ["hosts", "export", "--format", "toml"],
             ["hosts", "export", "group:"],
             ["hosts", "check", "probe-*", "--timeout", "2s"],
             ["hosts", "check", "probe-*", "--timeout", "2s", "-o", "json"],
             ["hosts", "check", "probe-2", "--timeout", "2s", "-o", "csv", "-c", "1"],
             # through the server: a page of one host per request, three requests
             ["hosts", "check", "probe-*", "--timeout", "30s", "-c", "1"],
             ["hosts", "check", "nope-*"], ["hosts", "check", "probe-1", "--timeout", "0s"],
             ["hosts", "check", "probe-1", "--become-user", "no body"]]
    differ = []
    for line in lines:
        direct, remote = deployment.direct(*line), deployment.remote(*line)
        alike = [(code, re.sub(r'"?latency_ms"?: [\d.]+|\s+\d+\n', "~", out), err)
                 for code, out, err in (direct, remote)]
        if alike[0] != alike[1]:
            differ.append(f"{line}:\n  direct {direct}\n  remote {remote}")
    assert not differ, "\n".join(differ)
    # And the export to a file says the same and writes the same file: every host and group
    # (this test's three, the deployment's five in web, and what the module's other tests made)
    hosts = len(json.loads(deployment.direct("hosts", "list", "-o", "json")[1]))
    groups = len(json.loads(deployment.direct("groups", "list", "-o", "json")[1]))
    assert hosts >= 8 and groups >= 1
    for run, name in ((deployment.direct, "direct.ini"), (deployment.remote, "remote.ini")):
        code, out, err = run("hosts", "export", "--out", str(tmp_path / name))
        assert (code, out) == (0, "") and err.startswith(
            f"exported {hosts} host(s), {groups} group(s) to"), err
    assert (tmp_path / "direct.ini").read_text() == (tmp_path / "remote.ini").read_text()
    # And the check's exit codes: 3 some host failed, 4 no host, 2 bad input
    assert deployment.remote("hosts", "check", "probe-1", "--timeout", "2s")[0] == 3
    # While executor options, files of this machine, are refused through a server
    code, out, err = deployment.remote("hosts", "check", "probe-1", "--executor-option",
                                       "identity_file=/tmp/key")
    assert (code, out) == (2, "") and "--executor-option" in one_line(err)


def test_tenants_list_and_set_print_the_same_in_both_modes(deployment: Deployment) -> None:
    since = deployment.mark()
    said = _both(
        deployment, "t",
        ["tenants", "set", "{p}-acme", "--approval-required", "--contact",
         "mailto:board@{p}-acme.example"],
        ["tenants", "set", "{p}-acme", "--no-approval-required", "-o", "json"],
        ["tenants", "set", "{p}-acme"],
        ["tenants", "set", "{p}-ac me", "--approval-required"],
        ["tenants", "set", "{p}-acme", "--contact", "ftp://nowhere"])
    assert said["direct"] == said["remote"]
    assert [code for code, _out, _err in said["remote"]] == [0, 0, 2, 2, 2]
    assert said["remote"][0][2] == ("tenant P-acme: approval required; contacts: "
                                    "mailto:board@P-acme.example\n")
    for _code, _out, err in said["remote"][2:]:
        one_line(err)
    for line in (["tenants", "list"], ["tenants", "list", "-o", "json"],
                 ["tenants", "list", "-o", "csv"]):
        assert deployment.direct(*line) == deployment.remote(*line)
    token = f"token:{_token_id(deployment)}"
    assert [via for _k, _who, via in _kinds_via(deployment, ("tenant-set",), since)] == [
        "local-cli", "local-cli", token, token]


def _tokens_alike(mode: str, text: str) -> str:
    text = re.sub(r"fst_[0-9a-f]{12}_[A-Za-z0-9_-]+", "fst_SECRET", text)
    return re.sub(r"token \d+|\bid \d+|revoke \d+|\"id\": \d+", "N", text)


def test_tokens_create_list_and_revoke_print_the_same_in_both_modes(
        deployment: Deployment) -> None:
    since = deployment.mark()
    said = _both(
        deployment, "k",
        ["tokens", "create", "{p}-ci", "--role", "viewer", "--expires", "90d"],
        ["tokens", "create", "{p}-ci", "--role", "viewer"],  # a live twin: refused
        ["tokens", "create", "{p}-acme", "--role", "customer-viewer", "--tenant", "{p}-acme",
         "--owner", "{p}-dash"],
        ["tokens", "create", "{p}-x", "--role", "root"],
        ["tokens", "create", "{p}-x", "--role", "customer-viewer"],
        ["tokens", "create", "{p}-x", "--role", "viewer", "--expires", "soon"],
        ["tokens", "revoke", "999"],
        alike=_tokens_alike)
    assert said["direct"] == said["remote"]
    assert [code for code, _out, _err in said["remote"]] == [0, 2, 0, 2, 2, 2, 4]
    _code, out, err = said["remote"][0]
    assert out == "fst_SECRET\n" and re.fullmatch(
        r"N \(P-ci\) acts as tester with role viewer; valid T\. It is shown only now: store "
        r"it in a secret manager\.\n", err)
    for _code, _out, err in said["remote"][1:2] + said["remote"][3:]:
        one_line(err)
    # And the list is the same in both modes and holds no token's secret
    deployment.remote("status")  # the remote token's last use, noted before the two lists
    for line in (["tokens", "list"], ["tokens", "list", "-o", "json"],
                 ["tokens", "list", "-o", "csv"]):
        assert deployment.direct(*line) == deployment.remote(*line)
    listed = deployment.remote("tokens", "list", "-o", "json")[1]
    assert "fst_" in listed and deployment.token not in listed
    assert deployment.token.split("_", 2)[2] not in listed
    # And the event of the token made through the server names the token that made it
    token = f"token:{_token_id(deployment)}"
    made = [(who, via) for _k, who, via in _kinds_via(deployment, ("token_create",), since)]
    assert made == [("tester", "local-cli")] * 2 + [("tester", token)] * 2


def test_a_token_made_through_the_server_works_at_once_and_its_revocation_holds_at_once(
        deployment: Deployment) -> None:
    # Given a viewer token made through the server
    since = deployment.mark()
    code, made, _err = deployment.remote("tokens", "create", "dash", "--role", "viewer")
    assert code == 0
    made = made.strip()
    token_id = _token_id(deployment, "dash")
    # Then it reads, and may not call what its role may not (the admin verbs)
    assert deployment.remote("hosts", "list", token=made)[:2] == deployment.direct("hosts",
                                                                                   "list")[:2]
    code, out, err = deployment.remote("tokens", "list", token=made)
    assert (code, out) == (1, "") and "role viewer may not call tokens.list" in one_line(err)
    code, out, err = deployment.remote("tokens", "revoke", str(_token_id(deployment)),
                                       token=made)
    assert (code, out) == (1, "") and "may not call tokens.revoke" in one_line(err)
    # When it is revoked through the server: the next request that shows it is refused
    code, out, err = deployment.remote("tokens", "revoke", str(token_id))
    assert (code, out) == (0, "") and err.startswith(f"token {token_id} (dash) revoked at ")
    refused = deployment.remote("hosts", "list", token=made)
    assert refused[:2] == (1, "") and made not in refused[2] and "revoked" in one_line(refused[2])
    # And a second revoke keeps the first time, as at the shell
    assert deployment.remote("tokens", "revoke", str(token_id)) == \
        deployment.direct("tokens", "revoke", str(token_id)) == (0, "", err)
    revoked = deployment.events_since(
        since, "SELECT id, kind, data FROM events WHERE kind = 'token_revoke'")
    assert len(revoked) == 1 and data(revoked[0])["principal"]["via"] == \
        f"token:{_token_id(deployment)}"

