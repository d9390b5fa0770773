"""docs/api/openapi.json is the document the API serves now: a route added, removed or changed
without regenerating the file fails here, with the one command that regenerates it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scheduler.server.openapi import PUBLISHED, REGENERATE

ROOT = Path(__file__).resolve().parents[2]


def test_the_published_openapi_document_is_the_one_the_server_serves(tmp_path: Path) -> None:
    # When the CLI prints the document (settings of an empty deployment: nothing is opened)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env |= {"XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-P", "-m", "scheduler", "server", "--openapi"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert '"openapi": "3.' in run.stdout and '"/api/v1/tasks/{task_id}"' in run.stdout
    # Then it is the committed file, byte for byte
    published = (ROOT / PUBLISHED).read_text()
    assert run.stdout == published, (
        f"{PUBLISHED} is not what the API serves now; regenerate it: {REGENERATE}")
