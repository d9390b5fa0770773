"""parallel-ssh (W5 only): ``ParallelSSHClient`` (its default native client, libssh2 through
ssh2-python, on gevent) with ``pool_size`` = the concurrency, one key file, per-host ports
through ``HostConfig``; ``run_command`` then ``join``.

parallel-ssh 2.16 does not check host keys at all, so this module adds the check the other
systems make: right after the handshake and before authentication, the session's host key must
be the one ``known_hosts`` records for ``[address]:port`` (libssh2's own known-hosts check,
``checkp``); any other answer fails the host. Runs inside parallel-ssh's own virtual environment.
"""

from __future__ import annotations

import time
from typing import Any

import pssh.clients.native.parallel as native_parallel
from pssh.clients.native import ParallelSSHClient, SSHClient
from pssh.config import HostConfig
from ssh2.knownhost import (
    LIBSSH2_KNOWNHOST_KEY_SHIFT,
    LIBSSH2_KNOWNHOST_KEYENC_RAW,
    LIBSSH2_KNOWNHOST_TYPE_PLAIN,
)

SETTINGS = ("native client (libssh2), pool_size = concurrency, run_command + join; host keys "
            "checked against known_hosts after the handshake (added here: parallel-ssh has no "
            "host-key check)")


class HostKeyMismatch(Exception):
    """The host presented a key that known_hosts does not hold for it."""


def _checked_client(known_hosts: str) -> type[SSHClient]:
    class CheckedClient(SSHClient):
        def _init_session(self, retries: int = 1) -> None:
            super()._init_session(retries)
            known = self.session.knownhost_init()
            known.readfile(known_hosts)
            key, key_type = self.session.hostkey()
            # libssh2's key type numbers map onto its known-host key bits one above them
            mask = (LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW
                    | ((key_type + 1) << LIBSSH2_KNOWNHOST_KEY_SHIFT))
            try:
                known.checkp(self.host.encode(), self.port, key, mask)
            except Exception as exc:
                raise HostKeyMismatch(f"host key of {self.host}:{self.port} is not the one in "
                                      f"{known_hosts}: {type(exc).__name__}") from None
    return CheckedClient


def fan_out(fleet: dict[str, Any], command: str, concurrency: int) -> dict[str, Any]:
    hosts = [h[1] for h in fleet["hosts"]]
    configs = [HostConfig(port=h[2], user=fleet["user"]) for h in fleet["hosts"]]
    start = time.time()
    # ParallelSSHClient makes its per-host clients from this module global: this process
    # only ever wants the checking one.
    native_parallel.SSHClient = _checked_client(fleet["known_hosts"])
    client = ParallelSSHClient(hosts, host_config=configs, pkey=fleet["identity"],
                               pool_size=concurrency, allow_agent=False, num_retries=1,
                               identity_auth=False)
    output = client.run_command(command, stop_on_errors=False)
    client.join(output)
    end = time.time()
    ok = sum(1 for o in output if o.exception is None and o.exit_code == 0)
    errors = sorted({f"{type(o.exception).__name__}: {o.exception}" for o in output
                     if o.exception is not None})[:3]
    return {"hosts": len(hosts), "ok": ok, "seconds": end - start, "errors": errors}
