"""The local executor: argv without a shell, bounded capture, timeouts that kill a group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from scheduler.errors import ValidationError
from tasks.executors import Host, build_executor
from tasks.executors.capture import Capture

HOST = Host(name="web-07", address="127.0.10.7", port=2222, user="ops")


def run(argv: list[str], timeout: float = 10.0, stdin: bytes | None = None, **options):
    with build_executor("local", options).session(HOST) as session:
        return session.run(argv, timeout=timeout, stdin=stdin)


def test_a_command_reports_exit_code_stdout_stderr_and_duration() -> None:
    result = run([sys.executable, "-c",
                  "import sys, time; time.sleep(0.1); print('out'); "
                  "print('err', file=sys.stderr); sys.exit(3)"])
    assert result.exit_code == 3
    assert result.stdout_head == "out\n" and result.stderr_head == "err\n"
    assert result.stdout_bytes == 4 and result.stderr_bytes == 4
    assert 0.1 <= result.duration_s < 5
    assert not result.ok and not result.timed_out and not result.simulated


def test_hostile_arguments_reach_the_process_as_exactly_the_argv_given() -> None:
    hostile = ["it's", '"q"', "$(touch /tmp/pwned)", "`id`", "a;b", "new\nline", " sp ace ",
               "-rf", "*", "", "\\"]
    result = run([sys.executable, "-c", "import sys; sys.stdout.write('\\0'.join(sys.argv[1:]))",
                  *hostile])
    assert result.ok
    assert result.stdout_head.split("\0") == hostile


def test_the_host_is_described_to_the_process_in_its_environment() -> None:
    result = run(["sh", "-c", 'echo "$FLEETSCHED_HOST $FLEETSCHED_HOST_ADDRESS '
                  '$FLEETSCHED_HOST_PORT $FLEETSCHED_HOST_USER"'])
    assert result.stdout_head == "web-07 127.0.10.7 2222 ops\n"


def test_large_output_on_both_streams_does_not_deadlock_and_keeps_head_and_tail() -> None:
    # Given a process writing 20 MB to stdout and to stderr interleaved, and reading stdin
    script = ("import sys\n"
              "data = sys.stdin.buffer.read()\n"
              "for i in range(20):\n"
              "    sys.stdout.buffer.write(bytes([65 + i]) * 1_000_000)\n"
              "    sys.stderr.buffer.write(bytes([97 + i]) * 1_000_000)\n"
              "sys.stdout.write('END-OUT'); sys.stderr.write(str(len(data)))\n")
    result = run([sys.executable, "-c", script], timeout=60, stdin=b"x" * 5_000_000)
    assert result.ok
    assert result.stdout_bytes == 20_000_007 and result.stderr_bytes == 20_000_000 + 7
    assert result.stdout_head == "A" * 8192 and result.stdout_tail.endswith("T" * 100 + "END-OUT")
    assert len(result.stdout_tail) == 8192
    assert result.stderr_head == "a" * 8192 and result.stderr_tail.endswith("t" * 100 + "5000000")


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # Given a shell that starts a grandchild which records its pid and sleeps
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = run(["sh", "-c", f'sh -c "echo \\$\\$ > {pidfile}; exec sleep 60" & wait'],
                 timeout=0.5)
    # Then the call returns at the timeout, marked timed out with no exit code
    assert result.timed_out and result.exit_code is None and not result.ok
    assert time.monotonic() - started < 5
    # And the grandchild is gone too
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_missing_program_reports_exit_code_127() -> None:
    result = run(["/nonexistent/program", "x"])
    assert result.exit_code == 127
    assert "/nonexistent/program" in result.stderr_head


def test_a_process_killed_by_a_signal_reports_128_plus_the_signal() -> None:
    result = run(["sh", "-c", "kill -TERM $$"])
    assert result.exit_code == 128 + 15


def test_put_rename_and_remove_work_on_the_local_filesystem(tmp_path: Path) -> None:
    executor = build_executor("local", {})
    with executor.session(HOST) as session:
        session.put(b"payload", str(tmp_path / "f.tmp"), mode=0o640)
        session.rename(str(tmp_path / "f.tmp"), str(tmp_path / "f"))
        assert (tmp_path / "f").read_bytes() == b"payload"
        assert (tmp_path / "f").stat().st_mode & 0o777 == 0o640
        assert not (tmp_path / "f.tmp").exists()
        session.remove(str(tmp_path / "f"))
        session.remove(str(tmp_path / "f"))  # a missing file is not an error
    assert not (tmp_path / "f").exists()


def test_an_unknown_option_is_refused_with_its_name() -> None:
    with pytest.raises(ValidationError, match="local executor has no option 'colour'"):
        build_executor("local", {"colour": "red"})


def test_an_unknown_executor_is_refused_with_the_choices() -> None:
    with pytest.raises(ValidationError, match="unknown executor 'telnet'") as info:
        build_executor("telnet", {})
    assert "ssh" in (info.value.hint or "")


@pytest.mark.parametrize("size", [0, 5, 8192, 16384, 16385, 100_000])
def test_capture_keeps_a_short_stream_whole_and_a_long_one_as_head_and_tail(size: int) -> None:
    data = bytes((i * 7) % 251 for i in range(size)).replace(b"\x80", b"x")
    capture = Capture(8192, 8192)
    for i in range(0, size, 1000):
        capture.feed(data[i:i + 1000])
    assert capture.total == size
    assert capture._head + capture._tail == (data if size <= 16384 else data[:8192] + data[-8192:])
    assert capture.truncated == (size > 16384)


def test_the_run_uses_the_configured_working_directory(tmp_path: Path) -> None:
    result = run(["pwd"], cwd=str(tmp_path))
    assert result.stdout_head.strip() == os.path.realpath(tmp_path)
