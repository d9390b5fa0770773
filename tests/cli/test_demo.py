"""``fleetsched demo`` end to end, through the installed console script, small and fast:
Bob's 4-host task finishes long before Alice's fleet-wide one (fair share under overload),
everything is recorded, and nothing is left behind or taken from the operator's own set-up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BINARY = Path(sys.executable).with_name("fleetsched")


def run_demo(tmp_path: Path, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update({"NO_COLOR": "1", "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": str(tmp_path / "tmp")})
    env.update(extra_env or {})
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run([str(BINARY), "demo", *args], capture_output=True, text=True, env=env,
                          timeout=240, check=False)


def test_the_demo_shows_bob_finishing_long_before_alice_and_records_everything(tmp_path: Path) -> None:
    # Given the operator's own configuration pointing at a Redis that does not exist
    bogus = tmp_path / "config" / "fleetsched" / "config.toml"
    bogus.parent.mkdir(parents=True)
    bogus.write_text('redis_url = "redis://127.0.0.1:1/0"\n')
    # When the demo runs as README.md offers it, "smaller and faster", with a JSON summary (at
    # this size Bob's hosts are the ones Alice's task is running when he submits: his job on
    # such a host waits for it and comes back to be placed fairly by the next reorder)
    result = run_demo(tmp_path, "--hosts", "500", "--speed", "3", "--output", "json",
                      extra_env={"FLEETSCHED_DATABASE_URL": "sqlite:////nonexistent/x.db"})
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    alice, bob = summary["tasks"]["alice"], summary["tasks"]["bob"]
    # Then it says it is a simulation, and Bob's task finished first, long before Alice's
    assert summary["simulation"] is True and "SIMULATION" in result.stderr
    assert alice["jobs"] == 500 and bob["jobs"] == 4
    assert summary["bob_finished_first"] is True
    assert bob["completed_s"] < alice["completed_s"] / 2, summary
    assert alice["succeeded"] + alice["failed"] == 500 and bob["succeeded"] + bob["failed"] == 4
    # ... because workers reordered the overdue jobs
    assert summary["reorders"] >= 1
    # ... and the record read back from SQL holds both tasks, every job
    audit = {t["who"]: t for t in summary["audit"]["tasks"]}
    assert audit["Alice"]["jobs"] == 500 and audit["Bob"]["jobs"] == 4
    assert summary["audit"]["events"] > 2 * 504
    # And nothing is left behind: no state directory, no redis-server of the demo's
    assert summary["state_dir"] is None
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not (tmp_path / "state").exists()


def test_the_demo_keeps_its_state_for_exploring_when_asked(tmp_path: Path) -> None:
    # (the fastest speed: what is kept does not depend on how the tasks went)
    result = run_demo(tmp_path, "--hosts", "100", "--speed", "20", "--keep")
    assert result.returncode == 0, result.stderr[-3000:]
    kept = [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("fleetsched-demo-")]
    assert len(kept) == 1
    try:
        assert (kept[0] / "fleetsched.db").exists()
        # The printed commands work on the kept state (its Redis restarts from the AOF)
        line = next(ln for ln in result.stdout.splitlines() if " report --html " in ln)
        argv = line.split()
        assert argv[0] == "fleetsched"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
        out = subprocess.run([str(BINARY), *argv[1:-2], "--output", "json"],
                             capture_output=True, text=True, env=env, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["totals"]["jobs"] == 104
    finally:
        subprocess.run([str(BINARY), "--state-dir", str(kept[0]), "redis", "stop"],
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(kept[0], ignore_errors=True)


@pytest.mark.parametrize("args, words", [
    (("--hosts", "3"), "--hosts"),
    (("--hosts", "99"), "--hosts"),
    (("--speed", "21"), "--speed"),
    (("--speed", "0"), "--speed"),
    (("--output", "csv"), "csv"),
])
def test_bad_demo_options_are_refused_before_anything_starts(tmp_path: Path, args, words) -> None:
    result = run_demo(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and words in result.stderr
    assert list((tmp_path / "tmp").iterdir()) == []


def test_tempdir_is_the_default_parent_of_the_demo_state() -> None:
    from rich.console import Console

    from scheduler.demo.run import Demo, DemoOptions

    demo = Demo(DemoOptions(hosts=100), Console(file=open(os.devnull, "w")))  # noqa: SIM115
    try:
        assert demo.dir.parent == Path(tempfile.gettempdir())
        assert demo.settings.redis_url is None and demo.settings.database_url is None
        assert demo.settings.state_dir == demo.dir
    finally:
        demo.close()
        demo.console.file.close()
    assert not demo.dir.exists()


def _processes_mentioning(text: str) -> list[int]:
    """Pids whose command line or environment mentions ``text`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            blob = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if text.encode() in blob:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_an_interrupted_demo_stops_its_workers_and_redis_and_removes_its_state(tmp_path: Path) -> None:
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update({"NO_COLOR": "1", "TMPDIR": str(tmp_path / "tmp")})
    (tmp_path / "tmp").mkdir()
    # Given a demo in the middle of Alice's task (at speed 1 it takes about 45 s, whatever the
    # number of hosts; 300 are imported and queued sooner than 2000)
    proc = subprocess.Popen([str(BINARY), "demo", "--hosts", "300"], env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        demo_dir = None
        deadline = time.monotonic() + 120
        while demo_dir is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if line.startswith("state: "):
                demo_dir = line.split()[1]
            assert line or proc.poll() is None, "the demo ended early"
        assert demo_dir is not None
        while "Alice submitted" not in proc.stderr.readline():
            assert time.monotonic() < deadline
        assert _processes_mentioning(demo_dir), "workers and redis run with the demo's state dir"
        # When it is told to stop
        proc.send_signal(signal.SIGTERM)
        with proc.stderr:
            err = proc.stderr.read()  # until the demo exits and closes it
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:  # a failed assertion: the demo still cleans up on SIGTERM
            proc.terminate()
            proc.wait(60)
    # Then it says so, and nothing of it is left: no process, no directory
    assert proc.returncode == 130
    assert "error: interrupted" in err
    assert _processes_mentioning(demo_dir) == []
    assert not Path(demo_dir).exists()
