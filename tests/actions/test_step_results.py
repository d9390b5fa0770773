"""Results that tell the truth (issue 26, section 5), on real OpenSSH hosts (tests/fleet.py).

A multi-step action's job takes its exit code and output from the step that decided its
outcome (``tasks.base.Steps.deciding``, ``workers.results.job_outcome``), and ``jobs show``
lists every step. A host whose sshd has no ``sftp`` subsystem fails a file-moving job once
with "SFTP is not available on the host", is not retried, and ``hosts check`` says so, unless
the host's ``fleetsched_files=shell`` sends its files through the shell.

The first tests run an action directly on a fleet host and read the job's outcome as the
worker builds it; the last ones go through a real worker node, its recorder and the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.queue.output import job_records, output_lines
from scheduler.record.migrate import upgrade
from tests.actions_support import run_action
from tests.fleet import FleetHost, SshFleet, current_user
from tests.submit_support import Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args
from workers.results import job_outcome

pytestmark = pytest.mark.sshd

NO_SFTP_MESSAGE = "SFTP is not available on the host"


def _outcome(result) -> tuple[int | None, list[dict], list[str]]:
    """What the worker reports for this action result: exit code, the step records, and the
    lines ``tasks output`` shows (the deciding step's)."""
    code, output = job_outcome(result)
    records = json.loads(output) if output else []
    return code, records, output_lines(job_records(records))


def _without_sftp(host: FleetHost) -> None:
    """Restart ``host``'s sshd with no ``Subsystem sftp`` line (as some appliances ship)."""
    host.config_path.write_text(host.config_path.read_text().replace(
        "Subsystem sftp internal-sftp\n", ""))
    host.restart()


# ------------------------------------------------------------------ the step that decides


def test_a_key_rollover_whose_done_check_says_not_yet_succeeds_with_the_post_checks_exit_code(
        ssh_fleet: SshFleet) -> None:
    # Given a rollover whose done check exits 2 ("not done yet") and whose other steps pass
    fh = ssh_fleet.hosts[0]
    params = {"done_check": ["sh", "-c", "echo not yet; exit 2"],
              "pre_check": ["echo", "zone ok"], "rollover": ["echo", "rolled"],
              "post_check": ["echo", "new key active"]}
    # When it runs
    result = run_action(ssh_fleet, fh, "key-rollover", params)
    code, records, lines = _outcome(result)
    # Then the job succeeded with the post-check's exit code 0, not the probe's 2
    assert result.ok, result.error
    assert code == 0
    assert [r["step"] for r in records] == ["done check", "pre-check", "rollover", "post-check"]
    assert [r["exit_code"] for r in records] == [2, 0, 0, 0]
    assert [r.get("decides", False) for r in records] == [False, False, False, True]
    # And its output is the deciding step's
    assert lines == ["new key active"]


def test_a_firmware_upgrade_failing_at_the_upgrade_shows_the_upgrades_exit_code_and_output(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a device at 4.1 whose upgrade command fails after the image went up
    fh = ssh_fleet.hosts[1]
    device = fh.root / "fw-steps"
    device.mkdir(exist_ok=True)
    (device / "version").write_text("4.1\n")
    image = tmp_path / "fw.bin"
    image.write_bytes(b"\x00" * 4096)
    params = {"image": str(image),
              "upgrade_cmd": ["sh", "-c", "echo flashing; echo bad block 7 >&2; exit 5"],
              "version_cmd": ["cat", str(device / "version")], "expected_version": "4.2"}
    # When it runs
    result = run_action(ssh_fleet, fh, "firmware", params)
    code, records, lines = _outcome(result)
    # Then the job failed with the upgrade's exit code and output, not mktemp's
    assert not result.ok and "upgrade failed (exit 5): bad block 7" in (result.error or "")
    assert code == 5
    [decider] = [r for r in records if r.get("decides")]
    assert decider["step"] == "upgrade" and decider["exit_code"] == 5
    assert lines == ["flashing", "[stderr] bad block 7"]
    # And every step is recorded in order, the cleanup after the failure marked as such
    steps = [r["step"] for r in records]
    assert steps == ["version check", "create a private temporary directory",
                     "upload the firmware image",
                     "verify the checksum of the uploaded firmware image", "upgrade",
                     "remove the temporary directory"], steps
    assert records[-1].get("cleanup") is True and records[-1]["exit_code"] == 0


def test_a_copy_failing_at_the_upload_shows_the_upload_error_not_the_checksum_probes(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a destination in a directory that does not exist (the probe of dest fails first)
    fh = ssh_fleet.hosts[2]
    src = tmp_path / "app.conf"
    src.write_bytes(b"setting=1\n")
    dest = fh.root / "no-such-dir" / "app.conf"
    # When it is copied
    result = run_action(ssh_fleet, fh, "copy", {"src": str(src), "dest": str(dest)})
    code, records, lines = _outcome(result)
    # Then the job's error is the upload's, and the deciding step is the upload
    assert not result.ok and "upload of the file" in (result.error or "")
    [decider] = [r for r in records if r.get("decides")]
    assert decider["step"] == "upload the file" and decider["command"].startswith("put ")
    assert decider["file"] is True
    assert "No such file" in decider["error"]
    # And the job has no exit code (no command decided) and none of the probe's stderr
    assert code is None
    assert records[0]["step"] == "checksum of the current file" and records[0]["exit_code"] == 1
    assert not any("sha256sum" in line for line in lines), lines


def test_output_over_its_budget_drops_early_steps_but_never_the_deciding_one() -> None:
    # Given forty steps, the second of which decided, each printing a lot
    from tasks.base import Step
    from tasks.host import CommandResult
    from workers.results import output_json

    steps = [Step(f"step {i}", f"echo {i}", CommandResult(
        command=f"echo {i}", exit_code=7 if i == 1 else 0, stdout_head=str(i) * 4000,
        stdout_bytes=4000)) for i in range(40)]
    # When the output must fit in a small budget
    records = json.loads(output_json(steps, budget=2_000, deciding=1))
    # Then later steps were kept, and the deciding one with them, marked
    assert records[0]["step"] == "step 1" and records[0]["decides"] is True
    assert records[0]["exit_code"] == 7 and records[-1]["step"] == "step 39"
    assert len(records) < 40


def test_a_secret_in_a_steps_command_and_error_is_masked_in_the_result() -> None:
    # Given a step that failed with the secret in its command and its error
    from scheduler.redact import Redactor
    from tasks.base import ActionResult, Step

    redactor = Redactor(["hunter2"])
    result = ActionResult(ok=False, results=[], error="failed: hunter2", steps=(
        Step("upload", "put /tmp/hunter2", None, 0.1, error="no room for hunter2"),),
        deciding=0)
    # When the result is redacted
    masked = redactor.action_result(result)
    # Then no step shows it
    [step] = masked.steps
    assert "hunter2" not in step.command + (step.error or "") + (masked.error or "")
    assert masked.deciding == 0


# --------------------------------------------------------------- a host without SFTP


def test_the_ssh_executor_says_sftp_is_not_available_and_commands_still_run(
        private_ssh_fleet: SshFleet) -> None:
    # Given a host whose sshd has no sftp subsystem
    fh = private_ssh_fleet.hosts[0]
    _without_sftp(fh)
    executor = private_ssh_fleet.executor()
    try:
        with executor.session(fh.host()) as session:
            # When a file is put there
            with pytest.raises(Exception) as raised:
                session.put(b"x", str(fh.root / "f"))
            # Then it is SftpUnavailableError with the one message, not "unreachable"
            assert type(raised.value).__name__ == "SftpUnavailableError"
            assert str(raised.value).startswith(f"{NO_SFTP_MESSAGE} {fh.name}")
            # And the same connection still runs commands
            assert session.run(["echo", "still here"], timeout=10).stdout_head == "still here\n"
    finally:
        executor.close()


def _pipeline(tmp_path: Path, redis_url: str, fleets: list[SshFleet]) -> tuple[Cli, str, dict]:
    """A migrated SQLite record with the fleets' hosts, and the env a worker node needs."""
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    known = tmp_path / "known_hosts"
    known.write_text("".join(f.known_hosts.read_text() for f in fleets))
    inventory(cli, tmp_path, "[all_hosts]\n" + "".join(
        f"{h.name} ansible_host={h.address} ansible_port={h.port} ansible_user={current_user()}\n"
        for f in fleets for h in f.hosts))
    env = {"FLEETSCHED_KNOWN_HOSTS": str(known), "FLEETSCHED_SSH_CONFIG": str(fleets[0].ssh_config),
           "FLEETSCHED_DATABASE_URL": db}
    return cli, db, env


def _identity(fleet: SshFleet) -> list[str]:
    return ["--executor-option", f"identity_file={fleet.identity}",
            "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false"]


def _run_worker(tmp_path: Path, redis_url: str, db: str, env: dict, task: int) -> None:
    args = [a for a in worker_args("steps-1", slots=2, processes=1) if a != "--no-recorder"]
    worker = WorkerProcess(redis_url, tmp_path, args, env=env)
    worker.start()
    try:
        def ended() -> bool:
            rows = sql_rows(db, "SELECT state FROM jobs WHERE task_id = :t", t=task)
            return bool(rows) and all(r.state in ("succeeded", "failed", "lost") for r in rows)

        wait_until(ended, 60, f"task {task} in SQL", worker.tail, [worker])
    finally:
        worker.stop()


def test_a_succeeded_key_rollover_records_exit_code_0_and_jobs_show_lists_its_steps(
        ssh_fleet: SshFleet, tmp_path: Path, redis_url: str) -> None:
    # Given a host, and a key rollover whose done check says "not yet" (exit 2)
    cli, db, env = _pipeline(tmp_path, redis_url, [ssh_fleet])
    task = cli.submit("key-rollover", "-t", "web-01",
                      "-p", "done_check=sh -c 'echo not yet; exit 2'",
                      "-p", "pre_check=echo zone ok", "-p", "rollover=echo rolled",
                      "-p", "post_check=echo new key active", *_identity(ssh_fleet))
    # When a worker node runs it
    _run_worker(tmp_path, redis_url, db, env, task)
    # Then the record holds exit code 0
    [job] = sql_rows(db, "SELECT id, state, exit_code FROM jobs WHERE task_id = :t", t=task)
    assert (job.state, job.exit_code) == ("succeeded", 0)
    # And jobs show lists each step with its exit code, the post-check deciding
    out = cli.ok("jobs", "show", job.id)
    assert ": succeeded, exit code 0" in out, out
    for n, step in enumerate(["done check: exit 2", "pre-check: exit 0", "rollover: exit 0",
                              "post-check: exit 0"], 1):
        assert f"step {n}, {step}" in out, out
    assert "post-check: exit 0" in next(ln for ln in out.splitlines()
                                        if "<- decided the outcome" in ln)
    assert "    | not yet" in out and "    | new key active" in out
    # And tasks output shows the deciding step's output only
    assert cli.ok("tasks", "output", str(task)).splitlines()[1:] == ["web-01: new key active"]


def test_a_copy_to_a_host_without_sftp_fails_once_saying_so_and_is_not_retried(
        private_ssh_fleet: SshFleet, tmp_path: Path, redis_url: str) -> None:
    # Given a host whose sshd has no sftp subsystem
    fh = private_ssh_fleet.hosts[0]
    _without_sftp(fh)
    cli, db, env = _pipeline(tmp_path, redis_url, [private_ssh_fleet])
    src = tmp_path / "app.conf"
    src.write_bytes(b"setting=1\n")
    # When a copy with retries left is run there
    task = cli.submit("copy", "-t", fh.name, "--retries", "2", "-p", f"src={src}",
                      "-p", f"dest={fh.root / 'app.conf'}", *_identity(private_ssh_fleet))
    _run_worker(tmp_path, redis_url, db, env, task)
    # Then the job failed for good on its first attempt, saying SFTP is missing, once
    [job] = sql_rows(db, "SELECT id, state, error FROM jobs WHERE task_id = :t", t=task)
    assert job.state == "failed"
    assert job.error.startswith(f"{NO_SFTP_MESSAGE} {fh.name}"), job.error
    assert job.error.count(NO_SFTP_MESSAGE) == 1 and "unreachable" not in job.error
    kinds = [r.kind for r in sql_rows(db, "SELECT kind FROM events WHERE job_id = :j "
                                          "ORDER BY ts, id", j=job.id)]
    assert kinds.count("claim") == 1 and "retry" not in kinds, kinds
    # And nothing was left on the host
    assert not list(fh.root.glob(".app.conf.fleetsched-*"))


def test_hosts_check_says_sftp_is_not_available_on_a_host_without_it(
        private_ssh_fleet: SshFleet, tmp_path: Path, redis_url: str) -> None:
    # Given a host whose sshd has no sftp subsystem
    fh = private_ssh_fleet.hosts[0]
    _without_sftp(fh)
    cli, _db, env = _pipeline(tmp_path, redis_url, [private_ssh_fleet])
    cli.env["FLEETSCHED_KNOWN_HOSTS"] = env["FLEETSCHED_KNOWN_HOSTS"]
    cli.env["FLEETSCHED_SSH_CONFIG"] = env["FLEETSCHED_SSH_CONFIG"]
    # When the hosts are checked
    code, out, err = cli("hosts", "check", fh.name, *_identity(private_ssh_fleet))
    # Then the host is reached and logged in to, and its row and finding say SFTP is missing
    assert code == 3, (out, err)
    cells = next(c for c in (ln.replace("│", " ").split() for ln in out.splitlines())
                 if c and c[0] == fh.name)
    assert cells[2:7] == ["yes", "ok", "ok", current_user(), "missing"], cells
    assert f"{fh.name}: no-sftp: {NO_SFTP_MESSAGE} {fh.name}" in err, err
    assert "hint: enable it in the host's sshd_config (Subsystem sftp internal-sftp)" in err
    assert "fleetsched_files=shell" in err
    assert "1 host(s): 0 ok" in err and "1 no SFTP" in err, err
    # And with SFTP back, the same host is ok
    fh.write_config()
    fh.restart()
    code, out, err = cli("hosts", "check", fh.name, *_identity(private_ssh_fleet))
    assert code == 0, (out, err)


# ------------------------------------------------- files through the shell, chosen per host


def _shell_files(fh: FleetHost):
    """``fh`` as the executor sees it with ``fleetsched_files=shell`` among its variables."""
    return fh.host(vars={"root": str(fh.root), "fleetsched_files": "shell"})


def test_a_host_without_sftp_set_to_files_through_the_shell_gets_copy_script_and_firmware(
        private_ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a host without SFTP whose inventory says fleetsched_files=shell
    fh = private_ssh_fleet.hosts[0]
    _without_sftp(fh)
    host = _shell_files(fh)
    data = bytes(range(256)) * 400 + b"no newline at the end"
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    dest = fh.root / "blob.bin"
    dest.write_bytes(b"old\n")
    dest.chmod(0o666)
    # When a file is copied there
    copied = run_action(private_ssh_fleet, fh, "copy",
                        {"src": str(src), "dest": str(dest), "mode": "0640"}, host=host)
    # Then it arrived byte for byte with its mode, by put and rename steps, nothing left over
    assert copied.ok, copied.error
    assert dest.read_bytes() == data and (dest.stat().st_mode & 0o7777) == 0o640
    assert [st.name for st in copied.steps if st.file] == ["upload the file", "rename into place"]
    assert sorted(p.name for p in fh.root.iterdir() if "blob" in p.name) == ["blob.bin"]
    # And a script and a firmware image go up and run the same way
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho hello from \"$1\"\n")
    ran = run_action(private_ssh_fleet, fh, "script", {"script": str(script), "args": ["shell"]},
                     host=host)
    assert ran.ok and ran.results[-2].stdout_head == "hello from shell\n", ran.error
    device = fh.root / "fw-shell"
    device.mkdir(exist_ok=True)
    (device / "version").write_text("1.0\n")
    image = tmp_path / "fw.bin"
    image.write_bytes(data)
    install = 'cp "$1" "$2/installed" && echo 2.0 > "$2/version"'
    upgraded = run_action(private_ssh_fleet, fh, "firmware", {
        "image": str(image), "upgrade_cmd": ["sh", "-c", install, "sh", "{image}", str(device)],
        "version_cmd": ["cat", str(device / "version")], "expected_version": "2.0"}, host=host)
    assert upgraded.ok, upgraded.error
    assert (device / "installed").read_bytes() == data


def test_files_through_the_shell_fail_for_good_where_the_host_refuses_them(
        private_ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a host that moves files through the shell
    fh = private_ssh_fleet.hosts[0]
    host = _shell_files(fh)
    src = tmp_path / "app.conf"
    src.write_bytes(b"setting=1\n")
    # When a copy goes into a missing directory, or onto a directory
    missing = run_action(private_ssh_fleet, fh, "copy", {
        "src": str(src), "dest": str(fh.root / "nowhere" / "app.conf")}, host=host)
    (fh.root / "a-dir").mkdir(exist_ok=True)
    executor = private_ssh_fleet.executor()
    try:
        with executor.session(host) as session:
            session.put(b"x", str(fh.root / "a-file"), mode=0o600)
            with pytest.raises(OSError, match="Is a directory"):
                session.rename(str(fh.root / "a-file"), str(fh.root / "a-dir"))
            session.remove(str(fh.root / "a-file"))
            session.remove(str(fh.root / "a-file"))  # a missing file is not an error
    finally:
        executor.close()
    # Then the copy failed for good at its upload, saying why in the host's words
    assert not missing.ok and not missing.retryable
    assert "upload of the file" in missing.error and "nonexistent" in missing.error.lower()
    [decider] = [st for st in missing.steps if st.name == "upload the file"]
    assert decider.file and decider.exit_code is None
    # And the directory is untouched, the file gone
    assert list((fh.root / "a-dir").iterdir()) == [] and not (fh.root / "a-file").exists()


def test_hosts_check_shows_files_through_the_shell_for_a_host_set_so(
        private_ssh_fleet: SshFleet, tmp_path: Path, redis_url: str) -> None:
    # Given a host without SFTP whose inventory says fleetsched_files=shell
    fh = private_ssh_fleet.hosts[0]
    _without_sftp(fh)
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db, env={
        "FLEETSCHED_KNOWN_HOSTS": str(private_ssh_fleet.known_hosts),
        "FLEETSCHED_SSH_CONFIG": str(private_ssh_fleet.ssh_config)})
    inventory(cli, tmp_path, f"{fh.name} ansible_host={fh.address} ansible_port={fh.port} "
                             f"ansible_user={current_user()} fleetsched_files=shell\n")
    # When it is checked
    code, out, err = cli("hosts", "check", fh.name, *_identity(private_ssh_fleet))
    # Then it is ok, its files going through the shell
    assert code == 0, (out, err)
    cells = next(c for c in (ln.replace("│", " ").split() for ln in out.splitlines())
                 if c and c[0] == fh.name)
    assert cells[6] == "shell", cells
