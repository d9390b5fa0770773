"""The OpenSSH client (W5 only), the floor: ``xargs -P N`` running one ``ssh`` per host, each a
full handshake, strict host-key checking, the fleet's key only, no connection sharing.

``xargs`` reads ``PORT user@address COMMAND`` triples and appends each to the ssh options, so
every host keeps its own port. Runs in fleetsched's interpreter (it needs no Python package).
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

SETTINGS = ("`xargs -P N -n 3 ssh -F (empty) -o BatchMode=yes -o StrictHostKeyChecking=yes "
            "-o UserKnownHostsFile=(fleet) -o IdentitiesOnly=yes -i KEY -p PORT user@addr CMD`")


def version() -> str:
    done = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False)
    return (done.stderr or done.stdout).strip().split(",")[0]


def fan_out(fleet: dict[str, Any], command: str, concurrency: int) -> dict[str, Any]:
    triples = "".join(f"{port} {fleet['user']}@{address} {command}\n"
                      for _name, address, port in fleet["hosts"])
    argv = ["xargs", "-P", str(concurrency), "-n", "3",
            "ssh", "-F", fleet["ssh_config"], "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={fleet['known_hosts']}",
            "-o", "IdentitiesOnly=yes", "-i", fleet["identity"], "-p"]
    start = time.time()
    done = subprocess.run(argv, input=triples, capture_output=True, text=True, check=False)
    end = time.time()
    n = len(fleet["hosts"])
    # xargs exits 0 only when every ssh did; its stderr then holds nothing of note
    return {"hosts": n, "ok": n if done.returncode == 0 else None, "seconds": end - start,
            "exit": done.returncode, "errors": done.stderr.strip().splitlines()[-3:]}
