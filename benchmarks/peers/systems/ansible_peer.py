"""Ansible (W5 only): the ad-hoc command ``ansible all -i INVENTORY -m raw -a COMMAND -f N``
with ansible-core's defaults (ssh connection plugin, its ControlMaster/ControlPersist
arguments, host_key_checking on) plus strict checking against the fleet's known_hosts. The
inventory gives each host its address and port; user, key and ssh arguments are group vars.
Runs inside Ansible's own virtual environment (``ansible`` is on PATH there). Its ControlPersist
masters live in this run's own control path directory and are told to exit after the command
(``ssh -O exit``), so no run reuses another's connections (nor holds them open afterwards).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

SETTINGS = ("`ansible all -m raw -a CMD -f N`, ansible-core defaults (ssh plugin with "
            "ControlPersist, host_key_checking on) + StrictHostKeyChecking=yes, the fleet's "
            "known_hosts and key")


def fan_out(fleet: dict[str, Any], command: str, concurrency: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fs-peers-ansible-"))
    control = home / "cp"
    try:
        inv = home / "hosts.ini"
        ssh_args = (f"-F {fleet['ssh_config']} -o StrictHostKeyChecking=yes "
                    f"-o UserKnownHostsFile={fleet['known_hosts']} -o IdentitiesOnly=yes")
        inv.write_text(
            "[fleet]\n"
            + "".join(f"{name} ansible_host={address} ansible_port={port}\n"
                      for name, address, port in fleet["hosts"])
            + f"[fleet:vars]\nansible_user={fleet['user']}\n"
            f"ansible_ssh_private_key_file={fleet['identity']}\n"
            f"ansible_ssh_common_args='{ssh_args}'\n")
        (home / "ansible.cfg").write_text("")
        env = {**os.environ, "ANSIBLE_CONFIG": str(home / "ansible.cfg"),
               "ANSIBLE_HOME": str(home), "ANSIBLE_HOST_KEY_CHECKING": "True",
               "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control), "ANSIBLE_NOCOLOR": "1"}
        start = time.time()
        done = subprocess.run(["ansible", "all", "-i", str(inv), "-m", "raw", "-a", command,
                               "-f", str(concurrency)], env=env, capture_output=True, text=True,
                              check=False)
        end = time.time()
    finally:
        for socket in control.glob("*"):
            subprocess.run(["ssh", "-S", str(socket), "-O", "exit", "fleet-host"],
                           capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)
    ok = sum(1 for line in done.stdout.splitlines() if " | CHANGED | rc=0" in line)
    return {"hosts": len(fleet["hosts"]), "ok": ok, "seconds": end - start,
            "exit": done.returncode,
            "errors": [ln for ln in done.stdout.splitlines() if "UNREACHABLE" in ln
                       or "FAILED" in ln][:3] + done.stderr.strip().splitlines()[-2:]}
