"""The ``key-rollover`` action: the recurring DNSSEC (or SSH) key rollover, checked before and after.

Steps:

1. ``done_check`` (optional): exit 0 means this rollover already happened (for instance the
   new key is already published), so the job succeeds with ``changed=False``: a retried or
   duplicated job is harmless, which is why the action is idempotent;
2. ``pre_check``: must exit 0 (zone signed and healthy, current key in place); otherwise
   nothing is changed and the job fails;
3. ``rollover``: the rollover itself; ``secret`` (a reference, e.g. a key passphrase) is fed
   to its standard input, never put in its argv where ``ps`` would show it;
4. ``post_check``: must exit 0 (new key active, zone validates), else the job fails.

A typical DNSSEC use, run by a schedule:
``pre_check="dnssec-verify -o example.org /var/named/example.org.signed"``,
``rollover="rndc dnssec -rollover -key 12345 example.org"``,
``post_check="dig +dnssec example.org DNSKEY"``.
"""

from __future__ import annotations

from typing import Any

from tasks.base import ActionContext, BaseAction, StepFailed, Steps
from tasks.host import Host
from tasks.params import Argv, Param, Text


class KeyRolloverAction(BaseAction):
    name = "key-rollover"
    description = "Roll a DNSSEC or SSH key over: pre-check, rollover, post-check (idempotent)."
    idempotent = True
    requires_window = False
    expected_ms = 60_000
    params = {
        "pre_check": Param("pre_check", Argv(), "must exit 0 before the rollover", required=True),
        "rollover": Param("rollover", Argv(), "the rollover command", required=True),
        "post_check": Param("post_check", Argv(), "must exit 0 after the rollover", required=True),
        "done_check": Param("done_check", Argv(), "exit 0 means already rolled over: do nothing"),
        "secret": Param("secret", Text(), "fed to the rollover command's stdin", secret=True),
    }

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        if params["done_check"]:
            done = steps.run(steps.render(params["done_check"]), "done check", check=False)
            if done.exit_code == 0:
                steps.changed = False
                return
        try:
            steps.run(steps.render(params["pre_check"]), "pre-check")
        except StepFailed as exc:
            raise StepFailed(f"{exc} (nothing was changed)", exc.retryable, exc.step) from None
        secret = params["secret"]
        steps.changed = True
        steps.run(steps.render(params["rollover"]), "rollover",
                  stdin=None if secret is None else secret.encode())
        steps.run(steps.render(params["post_check"]), "post-check")
