"""``{host.*}`` placeholders everywhere they are documented, refused everywhere else: a copy's
``dest`` is filled in per host on real sshd hosts, each value one path component (a value that
would leave the directory fails the job for good with one line, writing nothing), and a
placeholder in a parameter that does not take them is refused at submit with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.actions_support import run_action
from tests.fleet import SshFleet
from tests.submit_support import cli_with_inventory

pytestmark = pytest.mark.sshd


def test_a_copy_dest_with_a_host_placeholder_lands_under_each_hosts_name(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    src = tmp_path / "motd"
    src.write_text("welcome\n")
    for fh in ssh_fleet.hosts[:2]:
        # When a copy's dest names the host
        result = run_action(ssh_fleet, fh, "copy",
                            {"src": str(src), "dest": f"{fh.root}/x-{{host.name}}"})
        # Then the file lands under the host's name, not under the placeholder
        assert result.ok, result.error
        assert (fh.root / f"x-{fh.name}").read_text() == "welcome\n"
        assert not (fh.root / "x-{host.name}").exists()


@pytest.mark.parametrize("value", ["../../etc", "a/b", "..", ""])
def test_a_host_value_that_would_leave_the_directory_fails_the_copy_writing_nothing(
        ssh_fleet: SshFleet, tmp_path: Path, value: str) -> None:
    fh = ssh_fleet.hosts[2]
    src = tmp_path / "motd"
    src.write_text("welcome\n")
    host = fh.host(vars={"site": value})
    before = sorted(p.name for p in fh.root.iterdir())
    result = run_action(ssh_fleet, fh, "copy",
                        {"src": str(src), "dest": f"{fh.root}/sub/x-{{host.vars.site}}"},
                        host=host)
    assert not result.ok and not result.retryable and result.steps == ()
    assert result.error == (f"host {fh.name}: dest: a placeholder's value {value!r} is not "
                            "usable in a path (empty, '.', '..', or holds '/' or a newline)")
    assert sorted(p.name for p in fh.root.iterdir()) == before


@pytest.mark.parametrize(("action", "params", "line"), [
    ("copy", ["src=/srv/{host.name}.conf", "dest=/etc/app.conf"],
     ("error: action copy: parameter 'src' does not take {host.*} placeholders (only dest "
     "takes them)")),
    ("command", ["cmd=cat", "stdin={host.vars.token}"],
     ("error: action command: parameter 'stdin' does not take {host.*} placeholders (only cmd "
     "takes them)")),
    ("ansible", ["playbook=/srv/site.yml", "extra_vars=who={host.name}"],
     ("error: action ansible: parameter 'extra_vars' does not take {host.*} placeholders (none "
     "of its parameters takes them)")),
])
def test_a_placeholder_where_it_is_not_filled_in_is_refused_at_submit_with_one_line(
        tmp_path: Path, redis_url: str, action: str, params: list[str], line: str) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\n")
    args = [a for p in params for a in ("-p", p)]
    code, out, err = cli("submit", action, "-t", "web-01", "--dry-run", *args)
    assert code != 0 and out == ""
    assert err.splitlines() == [line, (f"hint: write the value itself; see: fleetsched actions "
                                      f"show {action}")]
