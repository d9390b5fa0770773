"""One virtual environment per peer, made with ``python -m venv`` and filled by pip from PyPI.

The environments live under ``benchmarks/peers/.venvs/<peer>`` (ignored by git) and are reused
when their requirements have not changed (a stamp file holds the requirement list). fleetsched
itself is not installed here: it runs from the interpreter that runs the benchmark (the
project's own ``.venv``). A peer that cannot be installed ends the run with one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"

# What pip installs for each peer (redis-py is the job body's client where the peer lacks it).
REQUIREMENTS: dict[str, list[str]] = {
    "rq": ["rq", "redis"],
    "celery": ["celery[redis]"],
    "arq": ["arq"],
    "dramatiq": ["dramatiq[redis]"],
    "huey": ["huey", "redis"],
    # W5 (SSH fan-out): the ad-hoc command of Ansible, and parallel-ssh's libssh2 client.
    "ansible": ["ansible-core"],
    "parallel-ssh": ["parallel-ssh"],
}
PEERS = tuple(REQUIREMENTS)


class InstallError(SystemExit):
    """A peer's environment could not be made: the run stops with one line."""


def python_of(peer: str) -> Path:
    """The interpreter of ``peer``'s environment, made (or refreshed) first if needed."""
    venv = VENVS / peer
    python = venv / "bin" / "python"
    stamp = venv / "requirements.stamp"
    wanted = "\n".join(REQUIREMENTS[peer]) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    VENVS.mkdir(exist_ok=True)
    print(f"installing {peer} into {venv} ({' '.join(REQUIREMENTS[peer])}) ...", flush=True)
    for argv in ([sys.executable, "-m", "venv", "--clear", str(venv)]
                 if not _is_venv_python(sys.executable) else
                 [_base_python(), "-m", "venv", "--clear", str(venv)],
                 [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                  *REQUIREMENTS[peer]]):
        done = subprocess.run(argv, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
            raise InstallError(f"error: cannot install {peer} ({' '.join(argv[-len(REQUIREMENTS[peer]):])}"
                               f"): {last}")
    stamp.write_text(wanted)
    return python


def _is_venv_python(executable: str) -> bool:
    return sys.prefix != sys.base_prefix and executable.startswith(sys.prefix)


def _base_python() -> str:
    """The interpreter the running virtual environment was made from."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base if base.exists() else Path(sys.base_prefix) / "bin" / "python3")


def versions(peer: str) -> dict[str, str]:
    """Installed versions of the peer's distributions and of redis-py, from its environment."""
    names = [r.split("[")[0] for r in REQUIREMENTS[peer]]
    names += [n for n in ("redis", "kombu") if n not in names]
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: pass\n"
            "print(json.dumps(out))")
    import json

    done = subprocess.run([str(python_of(peer)), "-c", code, *names], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)
