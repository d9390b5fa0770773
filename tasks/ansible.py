"""The ``ansible`` action: run ``ansible-playbook PLAYBOOK --limit HOST`` from the worker node.

For teams that keep their changes as playbooks. The default executor is ``local``: the process
runs on the worker node and Ansible itself connects to the host. The argv is built here:

    ansible-playbook [-i INVENTORY] --limit HOST [-e JSON] [--check --diff] [--tags T] PLAYBOOK

Extra vars go in as one ``-e`` with a JSON object, not as ``-e key=value``: Ansible splits
``key=value`` text on spaces and reads quotes and ``@file`` in it, while a JSON object is taken
verbatim, so no value can become a second variable or a file reference. The host name is
checked before it becomes a ``--limit`` pattern: pattern syntax (``, : ! & * ? [ ] ~ @``) and
the implicit groups ``all`` and ``ungrouped`` would widen or change the target, so such a name
fails the job instead. (A host named like one of the inventory's own groups would still select
that group: keep host and group names apart in the inventory Ansible reads.)
"""

from __future__ import annotations

import json
import re
from typing import Any

from tasks.base import ActionContext, BaseAction, StepFailed, Steps
from tasks.host import Host
from tasks.params import Boolean, KeyValues, LocalPath, Param, Text

_SAFE_LIMIT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_BUILTIN_GROUPS = ("all", "ungrouped")  # Ansible's implicit groups: a pattern for many hosts


def ansible_argv(binary: str, playbook: str, host: str, *, inventory: str | None = None,
                 extra_vars: dict[str, str] | None = None, check: bool = False,
                 tags: str | None = None) -> list[str]:
    """The ``ansible-playbook`` argv for one host (see the module docstring)."""
    if not _SAFE_LIMIT.fullmatch(host) or host in _BUILTIN_GROUPS:
        raise StepFailed(f"host name {host[:80]!r} cannot be an ansible --limit pattern safely "
                         "(only letters, digits, '.', '_' and '-')", retryable=False)
    argv = [binary]
    if inventory:
        argv += ["-i", inventory]
    argv += ["--limit", host]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars, sort_keys=True, ensure_ascii=False)]
    if check:
        argv += ["--check", "--diff"]
    if tags:
        argv += ["--tags", tags]
    return argv + [playbook]


class AnsibleAction(BaseAction):
    name = "ansible"
    description = "Run ansible-playbook PLAYBOOK --limit HOST on the worker node."
    idempotent = True  # playbooks are written to converge; say so in the task if yours is not
    requires_window = False
    expected_ms = 120_000
    default_executor = "local"
    params = {
        "playbook": Param("playbook", LocalPath(), "the playbook on the worker node",
                          required=True),
        "inventory": Param("inventory", LocalPath(), "inventory file (-i); default: Ansible's"),
        "extra_vars": Param("extra_vars", KeyValues(), "variables passed as one -e JSON object "
                            "(values may be secret references)", default={}),
        "check": Param("check", Boolean(), "dry run: --check --diff", default=False),
        "tags": Param("tags", Text(refs=False, pattern=r"[A-Za-z0-9_,.\-]+",
                                   expected="tags like deploy,config"), "only these tags"),
        "ansible_playbook": Param("ansible_playbook", Text(refs=False, pattern=r"[^\s]+",
                                                           expected="a program name or path"),
                                  "the ansible-playbook program", default="ansible-playbook"),
    }

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        argv = ansible_argv(
            params["ansible_playbook"], params["playbook"], host.name,
            inventory=params["inventory"], extra_vars=dict(params["extra_vars"]),
            check=params["check"], tags=params["tags"],
        )
        steps.run(argv, "ansible-playbook")
