"""The ``shell`` action: run a shell script on the host, under ``sh -c``, on purpose.

``cmd`` is kept as written (``uname -n; uptime | tail -1``) and runs as ``sh -c CMD``: pipes,
``;``, ``&&``, redirections and variables work. It is the same parameter name as the
``command`` action's, so that an operator who wanted a shell changes only the action's name;
``command`` stays the default that never involves a shell.

``{host.*}`` placeholders are replaced by the host's values, each quoted as one shell word
(``shlex.quote``): a host variable ``x'; rm -rf /`` arrives as that one word. That holds
because validation refuses a placeholder anywhere its quoted value would not be one word
(inside quotes, comments, here-documents: :mod:`tasks.shellscript`). :meth:`ShellAction.preview`
is the line a host runs, as the plan shows it for a sample host.
"""

from __future__ import annotations

import shlex
from typing import Any, ClassVar

from tasks.argv import PlaceholderError, render_quoted
from tasks.base import ActionContext, BaseAction, StepFailed, Steps
from tasks.host import Host
from tasks.params import Param, ShellScript, Text

SHELL = "sh"


def shell_argv(script: str, host: Host) -> list[str]:
    """The argv a host runs: ``sh -c`` and the script with its placeholders filled in."""
    return [SHELL, "-c", render_quoted(script, host)]


class ShellAction(BaseAction):
    name = "shell"
    description = "Run a shell script on the host with sh -c (pipes, ;, &&; {host.*} values quoted)."
    idempotent = False  # an arbitrary script may not be safe to run twice
    requires_window = False
    expected_ms = 10_000
    params: ClassVar[dict[str, Param]] = {
        "cmd": Param("cmd", ShellScript(), "the script, run with sh -c; {host.*} placeholders "
                     "are replaced by quoted values (write them bare, not inside quotes)",
                     required=True),
        "stdin": Param("stdin", Text(), "text fed to the script's standard input "
                       "(may be a secret reference, which keeps the secret out of the script)"),
    }

    def preview(self, params: dict[str, Any], host: Host) -> str:
        """The command line ``host`` runs for these (validated) parameters."""
        return shlex.join(shell_argv(params["cmd"], host))

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        try:
            argv = shell_argv(params["cmd"], host)
        except PlaceholderError as exc:
            raise StepFailed(str(exc), retryable=False) from None
        stdin = params["stdin"]
        steps.run(argv, "shell", stdin=None if stdin is None else stdin.encode())
