"""``command``, ``script`` and ``key-rollover`` end to end on real OpenSSH hosts, including the
hostile-string quoting proof and the secret canary at the action level."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest

from scheduler.redact import MASK
import tasks
from tasks import ActionContext, RedactingFilter, Redactor
from tests.actions_support import run_action
from tests.fleet import SshFleet

pytestmark = pytest.mark.sshd

# Prints its arguments as JSON: what the remote program really received, element by element.
ECHO_ARGV = [sys.executable, "-c", "import json, sys; sys.stdout.write(json.dumps(sys.argv[1:]))"]


def hostile(canary: Path) -> list[str]:
    """Strings that would run ``touch canary`` (or worse) if anything interpolated them."""
    c = str(canary)
    return [
        f"; touch {c}", f"$(touch {c})", f"`touch {c}`", f"' ; touch {c} ; '",
        f'" ; touch {c} ; "', f"&& touch {c}", f"| touch {c}", f"\ntouch {c}\n", f"> {c}",
        "$HOME", "${PATH}", "*", "~", "\\", "'", '"', "", " ", "-rf", "--", "\t\r",
        "\x1b[31mred", "ümlaut €", "{}", "%s%n", "!!", "#comment",
    ]


def test_hostile_parameters_host_names_and_vars_arrive_as_exactly_the_argv_given(
        ssh_fleet: SshFleet) -> None:
    fh = ssh_fleet.hosts[0]
    canary = fh.root / "pwned"
    evil = hostile(canary)
    # Given a host whose name and variables are hostile too (the address is the real one)
    host = fh.host(name=f"web-01; touch {canary}",
                   vars={"zone": f"$(touch {canary})", "n": 7})
    cmd = [*ECHO_ARGV, *evil, "{host.name}", "zone={host.vars.zone}", "{host.vars.n}"]
    # When the command action runs over SSH (and gets a hostile stdin too)
    result = run_action(ssh_fleet, fh, "command",
                        {"cmd": cmd, "stdin": f"'; touch {canary}"}, host=host)
    # Then the remote program received exactly those elements, each whole
    assert result.ok, result.error
    received = json.loads(result.results[0].stdout_head)
    assert received == [*evil, f"web-01; touch {canary}", f"zone=$(touch {canary})", "7"]
    # and nothing ran that the operator did not write
    assert not canary.exists()


def test_a_command_string_is_split_at_validation_and_never_reaches_a_shell(
        ssh_fleet: SshFleet) -> None:
    fh = ssh_fleet.hosts[1]
    canary = fh.root / "pwned-string"
    line = f"{sys.executable} -c 'import sys; print(sys.argv[1:])' 'a b' \"; touch {canary}\""
    result = run_action(ssh_fleet, fh, "command", {"cmd": line})
    assert result.ok and result.results[0].stdout_head == f"['a b', '; touch {canary}']\n"
    assert not canary.exists()


def test_a_failing_command_fails_the_job_with_its_exit_code_and_last_stderr_line(
        ssh_fleet: SshFleet) -> None:
    result = run_action(ssh_fleet, ssh_fleet.hosts[0], "command",
                        {"cmd": ["sh", "-c", "echo working; echo 'disk full' >&2; exit 3"]})
    assert not result.ok and result.retryable
    assert result.error == "command failed (exit 3): disk full"
    assert result.results[0].exit_code == 3


def test_a_missing_host_variable_fails_for_good_before_anything_runs(ssh_fleet: SshFleet) -> None:
    result = run_action(ssh_fleet, ssh_fleet.hosts[0], "command",
                        {"cmd": "echo {host.vars.datacenter}"})
    assert not result.ok and not result.retryable and result.results == []
    assert result.error == ("host web-01 has no variable 'datacenter' "
                            "(used as {host.vars.datacenter})")


# ------------------------------------------------------------------------------------ script

SCRIPT = """#!/bin/sh
# reports where it runs and with what, then exits with $EXIT_WITH (default 0)
echo "path=$0"
echo "dirmode=$(stat -c %a "$(dirname "$0")")"
echo "selfmode=$(stat -c %a "$0")"
for a in "$@"; do echo "arg=$a"; done
read line && echo "stdin=$line"
exit "${EXIT_WITH:-0}"
"""


def _script(tmp_path: Path, body: str = SCRIPT) -> str:
    path = tmp_path / "deploy.sh"
    path.write_text(body)
    return str(path)


def _reported(result: tasks.ActionResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in result.results[-2].stdout_head.splitlines():
        key, _, value = line.partition("=")
        out.setdefault(key, []).append(value)
    return out


def test_a_script_runs_from_a_private_temporary_directory_that_is_removed_afterwards(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[2]
    tmp_base = fh.root / "tmp-script-ok"
    tmp_base.mkdir()
    result = run_action(ssh_fleet, fh, "script", {
        "script": _script(tmp_path), "args": ["two words", "$(id)", "{host.name}"],
        "stdin": "fed in\n", "remote_tmp": str(tmp_base)})
    assert result.ok, result.error
    seen = _reported(result)
    remote = Path(seen["path"][0])
    assert remote.parent.parent == tmp_base and remote.parent.name.startswith("fleetsched.")
    assert seen["dirmode"] == ["700"] and seen["selfmode"] == ["700"]
    assert seen["arg"] == ["two words", "$(id)", fh.name]
    assert seen["stdin"] == ["fed in"]
    # the last step removed the private directory and the script with it
    assert result.results[-1].command.startswith("rm -rf ")
    assert list(tmp_base.iterdir()) == []


def test_a_failing_script_is_removed_all_the_same(ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[2]
    tmp_base = fh.root / "tmp-script-fail"
    tmp_base.mkdir()
    result = run_action(ssh_fleet, fh, "script", {
        "script": _script(tmp_path, "#!/bin/sh\necho 'no such service' >&2\nexit 4\n"),
        "remote_tmp": str(tmp_base)})
    assert not result.ok and result.error == "script failed (exit 4): no such service"
    assert list(tmp_base.iterdir()) == []


def test_a_script_that_outlives_the_job_timeout_is_killed_and_removed(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[3]
    tmp_base = fh.root / "tmp-script-slow"
    tmp_base.mkdir()
    result = run_action(ssh_fleet, fh, "script", {
        "script": _script(tmp_path, "sleep 60\n"), "interpreter": "sh",
        "remote_tmp": str(tmp_base)}, timeout_s=2.0)
    assert not result.ok and "script timed out" in (result.error or "")
    assert list(tmp_base.iterdir()) == []


def test_a_script_missing_on_the_worker_fails_for_good_without_touching_the_host(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    result = run_action(ssh_fleet, ssh_fleet.hosts[0], "script",
                        {"script": str(tmp_path / "nope.sh")})
    assert not result.ok and not result.retryable and result.results == []
    assert "nope.sh cannot be read on this worker" in (result.error or "")


# ------------------------------------------------------------------------------ key-rollover


def _rollover(root: Path, **extra: object) -> dict[str, object]:
    return {
        "pre_check": ["test", "-f", f"{root}/zone.signed"],
        "rollover": ["sh", "-c", 'cat > "$1/new.key"; echo rolled >> "$1/rollovers"', "sh",
                     str(root)],
        "post_check": ["test", "-s", f"{root}/new.key"],
        **extra,
    }


def test_a_key_rollover_checks_rolls_with_the_secret_on_stdin_and_checks_again(
        ssh_fleet: SshFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    fh = ssh_fleet.hosts[1]
    root = fh.root / "dns-1"
    root.mkdir()
    (root / "zone.signed").write_text("signed")
    monkeypatch.setenv("FS_TEST_KSK_PIN", "ksk-pin-424242")
    params = _rollover(root, secret="@env:FS_TEST_KSK_PIN",
                       done_check=["test", "-f", f"{root}/new.key"])
    first = run_action(ssh_fleet, fh, "key-rollover", params)
    assert first.ok and first.changed, first.error
    assert (root / "new.key").read_text() == "ksk-pin-424242"
    assert "ksk-pin-424242" not in repr(first)
    # Run again (a retried or duplicated job): the done check sees it happened; nothing rolls
    second = run_action(ssh_fleet, fh, "key-rollover", params)
    assert second.ok and second.changed is False
    assert (root / "rollovers").read_text() == "rolled\n"


def test_a_failing_pre_check_changes_nothing(ssh_fleet: SshFleet) -> None:
    fh = ssh_fleet.hosts[1]
    root = fh.root / "dns-2"
    root.mkdir()
    result = run_action(ssh_fleet, fh, "key-rollover", _rollover(root))
    assert not result.ok
    assert result.error == "pre-check failed (exit 1) (nothing was changed)"
    assert not (root / "rollovers").exists() and len(result.results) == 1


def test_a_failing_post_check_fails_the_rollover(ssh_fleet: SshFleet) -> None:
    fh = ssh_fleet.hosts[1]
    root = fh.root / "dns-3"
    root.mkdir()
    (root / "zone.signed").write_text("signed")
    params = _rollover(root, post_check=["sh", "-c", "echo 'DNSKEY missing' >&2; exit 2"])
    result = run_action(ssh_fleet, fh, "key-rollover", params)
    assert not result.ok and result.changed
    assert result.error == "post-check failed (exit 2): DNSKEY missing"


# ------------------------------------------------------------------------ secrets canary


CANARY = "canary-5ec2e7-Zq"


@pytest.mark.parametrize("exit_code", [0, 1])
def test_a_secret_canary_reaches_the_host_but_no_result_or_log_line(
        ssh_fleet: SshFleet, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        exit_code: int) -> None:
    # Given a canary secret, a command that echoes it on stdout and stderr, and debug logging
    # everywhere through a handler filtered the way the worker's child filters its own
    fh = ssh_fleet.hosts[exit_code]
    proof = fh.root / f"canary-arrived-{exit_code}"
    monkeypatch.setenv("FS_TEST_CANARY", CANARY)
    redactor = Redactor()
    caplog.handler.addFilter(RedactingFilter(redactor))
    caplog.set_level(logging.DEBUG)
    action = tasks.get_action("command")
    params = {"cmd": ["sh", "-c", 'printf %s "$1" > "$2"; echo "token=$1"; echo "bad $1" >&2; '
                      'exit "$3"', "sh", "@env:FS_TEST_CANARY", str(proof), str(exit_code)]}
    stored = action.dump(action.validate(params))
    # When the job runs
    result = run_action(ssh_fleet, fh, "command", params, ctx=ActionContext(redactor=redactor))
    # Then the host got the real value (so this test can fail) ...
    assert proof.read_text() == CANARY
    assert result.ok is (exit_code == 0)
    # ... and it is nowhere else: not in what is stored, the result, its error, or any log line
    assert CANARY not in json.dumps(stored) and "@env:FS_TEST_CANARY" in json.dumps(stored)
    assert CANARY not in repr(result)
    assert result.results[0].stdout_head == f"token={MASK}\n"
    logged = [r.getMessage() for r in caplog.records if r.name == "fleetsched.actions"]
    assert any(f"{MASK} {proof}" in m for m in logged), "the command itself was logged, masked"
    assert CANARY not in caplog.text
    assert all(CANARY not in str(getattr(r, "msg", "")) for r in caplog.records)
    assert os.environ["FS_TEST_CANARY"] == CANARY
