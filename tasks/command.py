"""The ``command`` action: run one command on the host, as an argv, never through a shell.

``cmd`` is a list of strings, or a string split with ``shlex.split`` when the task is validated
(so the split is visible in the task's record and never happens again on the host). Elements
may hold ``{host.name}``-style placeholders, substituted inside their own element at run time,
and may be secret references (a whole element). The session quotes every element; a value can
never become shell syntax. To use a shell on purpose, say so: ``cmd=["sh", "-c", "a | b"]`` –
the script is then a fixed string the operator wrote, and values go in as ``"$1"`` arguments.
"""

from __future__ import annotations

from typing import Any

from tasks.base import ActionContext, BaseAction, Steps
from tasks.host import Host
from tasks.params import Argv, Param, Text


class CommandAction(BaseAction):
    name = "command"
    description = "Run one command on the host (an argv; never interpreted by a shell)."
    idempotent = False  # an arbitrary command may not be safe to run twice
    requires_window = False
    expected_ms = 10_000
    params = {
        "cmd": Param("cmd", Argv(), "the command: a list, or a string split with shlex",
                     required=True),
        "stdin": Param("stdin", Text(), "text fed to the command's standard input "
                       "(may be a secret reference, which keeps the secret out of argv)"),
    }

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        stdin = params["stdin"]
        steps.run(steps.render(params["cmd"]), "command",
                  stdin=None if stdin is None else stdin.encode())
