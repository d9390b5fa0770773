"""The ``ansible`` action on the local executor, against a stand-in ``ansible-playbook``.

Ansible is not installed here; a small script named ``ansible-playbook``, first on PATH, records
the argv it was started with (a test double of an external CLI). What is proved is what this
project owns: the exact argv, its quoting, and the refusal of host names that are patterns.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from scheduler.redact import MASK
import tasks
from tasks.executors import build_executor
from tasks.host import Host

FAKE = """#!{python}
import json, os, sys
with open(os.environ["FAKE_ANSIBLE_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
print("PLAY RECAP ok=1")
code = int(os.environ.get("FAKE_ANSIBLE_EXIT", "0"))
if code:
    print("fatal: [host]: FAILED! => task 'deploy' failed", file=sys.stderr)
sys.exit(code)
"""

HOSTILE = {
    "quote": "x'; touch /tmp/fs-pwned-ansible #",
    "subst": "$(id) `id` ${HOME}",
    "spaces": "a b=c d=e",
    "at_file": "@@/etc/passwd",  # a literal "@/etc/passwd" (a single @ starts a secret reference)
    "newline": "line1\nline2",
    "braces": "{{ lookup('pipe', 'id') }}",
}


@pytest.fixture
def fake_ansible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recording ``ansible-playbook`` first on PATH; returns the file of recorded argvs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ansible-playbook"
    script.write_text(FAKE.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "argv.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_ANSIBLE_LOG", str(log))
    return log


def run_ansible(params: dict, host: Host) -> tasks.ActionResult:
    action = tasks.get_action("ansible")
    executor = build_executor(action.default_executor, {})
    with executor.session(host) as session:
        return action.run(session, host, action.validate(params), timeout_s=30)


def recorded(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_playbook_runs_limited_to_the_host_with_extra_vars_as_one_verbatim_json(
        fake_ansible: Path) -> None:
    # Given extra vars full of shell and Ansible syntax
    params = {"playbook": "/srv/pb/site.yml", "inventory": "/srv/pb/hosts",
              "extra_vars": HOSTILE, "check": "yes", "tags": "deploy,config"}
    # When the action runs for web-01
    result = run_ansible(params, Host("web-01"))
    # Then ansible-playbook got exactly this argv, the vars as one JSON object, unchanged
    assert result.ok, result.error
    [argv] = recorded(fake_ansible)
    assert argv[:-1] == ["-i", "/srv/pb/hosts", "--limit", "web-01", "-e", argv[5],
                         "--check", "--diff", "--tags", "deploy,config"]
    assert argv[-1] == "/srv/pb/site.yml"
    assert json.loads(argv[5]) == {**HOSTILE, "at_file": "@/etc/passwd"}
    assert not Path("/tmp/fs-pwned-ansible").exists()
    assert "PLAY RECAP" in result.results[0].stdout_head


def test_the_argv_string_form_is_split_once_and_values_stay_whole(fake_ansible: Path) -> None:
    run_ansible({"playbook": "/pb.yml",
                 "extra_vars": "msg='two words; rm -rf /' n=1"}, Host("db-02"))
    [argv] = recorded(fake_ansible)
    assert argv == ["--limit", "db-02", "-e", json.dumps({"msg": "two words; rm -rf /", "n": "1"},
                                                         sort_keys=True), "/pb.yml"]


@pytest.mark.parametrize("name", ["all", "ungrouped", "web-*", "web-01,db-01", "!web-01", "@hosts.txt",
                                  "web[0:9]", "a:b", "-e x"])
def test_a_host_name_that_is_an_ansible_pattern_fails_without_running_anything(
        fake_ansible: Path, name: str) -> None:
    result = run_ansible({"playbook": "/pb.yml"}, Host(name))
    assert not result.ok and not result.retryable
    assert "cannot be an ansible --limit pattern" in (result.error or "")
    assert recorded(fake_ansible) == []


def test_a_failing_playbook_fails_the_job_with_its_last_error_line(
        fake_ansible: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_ANSIBLE_EXIT", "2")
    result = run_ansible({"playbook": "/pb.yml"}, Host("web-03"))
    assert not result.ok and result.retryable
    assert result.error == ("ansible-playbook failed (exit 2): fatal: [host]: FAILED! => "
                            "task 'deploy' failed")


def test_a_secret_extra_var_reaches_ansible_but_not_the_result(
        fake_ansible: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FS_TEST_VAULT_PASS", "vault-canary-31337")
    result = run_ansible({"playbook": "/pb.yml", "extra_vars": {"vault": "@env:FS_TEST_VAULT_PASS"}},
                         Host("web-04"))
    [argv] = recorded(fake_ansible)
    assert json.loads(argv[3]) == {"vault": "vault-canary-31337"}
    assert "vault-canary-31337" not in repr(result) and MASK in result.results[0].command
