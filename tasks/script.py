"""The ``script`` action: upload a script from the worker node, run it on the host, remove it.

Steps: make a private directory on the host (``mktemp -d`` under ``remote_tmp``: mode 0700, an
unpredictable name), upload the script there over SFTP with mode 0700, run it (directly, or with
``interpreter``) with ``args``, then remove the directory – always, also when the script
failed or timed out (unless the connection itself is gone, which the result then says).
"""

from __future__ import annotations

import posixpath
from typing import Any

from tasks.base import ActionContext, BaseAction, StepFailed, Steps
from tasks.host import Host
from tasks.params import Argv, LocalPath, Param, RemotePath, Sha256, Text
from tasks.remote import make_temp_dir, read_local, remove_temp_dir, sha256_hex, upload


class ScriptAction(BaseAction):
    name = "script"
    description = "Upload a script to a private temporary directory on the host, run it, remove it."
    idempotent = False
    requires_window = False
    expected_ms = 30_000
    params = {
        "script": Param("script", LocalPath(), "the script on the worker node", required=True),
        "args": Param("args", Argv(allow_empty=True), "arguments for the script", default=[]),
        "interpreter": Param("interpreter", Argv(), "run the script with this (e.g. /bin/bash); "
                             "default: execute it directly (it needs a #! line)"),
        "stdin": Param("stdin", Text(), "text fed to the script's standard input (may be a "
                       "secret reference)"),
        "sha256": Param("sha256", Sha256(), "refuse to run unless the script has this checksum"),
        "remote_tmp": Param("remote_tmp", RemotePath(directory=True),
                            "where on the host the private directory is made", default="/tmp"),
    }

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        data = read_local(params["script"], "script")
        if params["sha256"] and sha256_hex(data) != params["sha256"]:
            raise StepFailed(f"script {params['script']} does not have the required sha256 "
                             f"{params['sha256'][:16]}...", retryable=False)
        argv_tail = steps.render(params["args"])
        interpreter = steps.render(params["interpreter"]) if params["interpreter"] else []
        stdin = None if params["stdin"] is None else params["stdin"].encode()
        tmp = make_temp_dir(steps, params["remote_tmp"])
        try:
            path = posixpath.join(tmp, posixpath.basename(params["script"]) or "script")
            upload(steps, data, path, "script", mode=0o700)
            steps.run([*interpreter, path, *argv_tail], "script", stdin=stdin)
        finally:
            steps.cleanup("remove the script", lambda: remove_temp_dir(steps, tmp))
