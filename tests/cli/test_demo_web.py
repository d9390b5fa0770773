"""``fleetsched demo --web`` through the installed console script, small and fast: it prints
the console's URL and an admin token, the console signs in with that token through its form
and shows the demo's fleet, the console stays up after the summary until Ctrl-C, and then
nothing of the demo is left (no server answering, no directory)."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.cli.test_demo import BINARY
from tests.server.console.conftest import sign_in

WAIT_S = 240.0  # the whole demo at --speed 20 takes ~15 s; a loaded CI machine, far more


def _lines(stream: object) -> tuple[queue.Queue[str | None], threading.Thread]:
    """The stream's lines as they come, then None at its end (read in a thread, so a wait
    for a line has a deadline), and the thread (joined once the process has ended)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, reader


def _until(lines: queue.Queue[str | None], prefix: str, seen: list[str]) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if line.strip().startswith(prefix):
            return line.strip()
    raise AssertionError(f"no line starting {prefix!r}; stderr so far:\n" + "\n".join(seen))


def test_the_demo_with_web_prints_a_url_and_a_token_that_sign_in_to_its_console(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update({"NO_COLOR": "1", "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": str(tmp_path / "tmp")})
    (tmp_path / "tmp").mkdir()
    # When the demo runs small and fast with --web
    proc = subprocess.Popen([str(BINARY), "demo", "--web", "--hosts", "100", "--speed", "20"],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: list[str] = []
    err, reader = _lines(proc.stderr)
    try:
        # Then it prints the console's URL and a token, one line each
        url = _until(err, "web console: ", seen).removeprefix("web console: ")
        token = _until(err, "sign in with this token: ", seen).split(": ", 1)[1]
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.path == "/ui/"
        assert token.startswith("fst_")
        # And the console signs in with it through its form, and shows the fleet to an admin
        root = f"http://127.0.0.1:{parts.port}"
        browsing = sign_in(root, token)
        try:
            page = browsing.get("/ui/")
            assert page.status_code == 200, page.text[:300]
            assert "Fleet now" in page.text and "· admin" in page.text
            # And after the summary (on stdout) the console is still up, until Ctrl-C
            _until(err, "The demo has ended; its web console stays up", seen)
            assert browsing.get("/ui/").status_code == 200
        finally:
            browsing.client.close()
        proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()  # type: ignore[union-attr]
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        reader.join(30)
        for stream in (proc.stdout, proc.stderr):
            stream.close()  # type: ignore[union-attr]
    # Then Ctrl-C is the demo's normal end: the summary was printed, and nothing is left
    assert proc.returncode == 0, "\n".join(seen)
    assert "Audit (read back from the SQL record" in out
    assert list((tmp_path / "tmp").iterdir()) == []
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", parts.port or 0)) != 0
