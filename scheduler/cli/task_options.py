"""The task options ``submit`` and ``schedules add`` share, as a ``TaskRequest``.

Only the command line's own syntax is parsed here (``--param NAME=VALUE`` pairs through
``scheduler.submission.request.pairs``, which the web console's submit form shares,
``--executor-option`` and ``--become-user``); the values are mapped to a request by
``scheduler.submission.request.task_request``, as a task file's are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.errors import ValidationError

if TYPE_CHECKING:
    from scheduler.submission.submit import TaskRequest


def request_of(action: str | None, target: str | None, params: list[str] | None,
               at: str | None, in_: str | None, options: dict[str, Any]) -> TaskRequest:
    """The request the options ask for; ``options`` by the option's name (``max_concurrency``
    for ``--max-concurrency``), a missing one meaning not given."""
    from scheduler.submission.request import pairs, task_request

    if not action:
        raise ValidationError("no action given", hint="fleetsched submit ACTION --target EXPR, "
                                                      "or fleetsched submit -f task.yaml")
    if not target:
        raise ValidationError("no --target given", hint="e.g. --target group:web,!web-07")
    if at and in_:
        raise ValidationError("give --at or --in, not both")
    given = {key: value for key, value in options.items()
             if key not in ("executor_option", "become_user")}
    given.update(action=action, target=target, params=pairs(params, "--param"), at=at,
                 executor_options=_executor_options(options))
    given["in"] = in_
    return task_request(given)


def _executor_options(options: dict[str, Any]) -> dict[str, Any]:
    """``--executor-option`` pairs, with ``--become-user`` as the ssh option ``become_user``."""
    from scheduler.submission.request import pairs

    out: dict[str, Any] = pairs(options.get("executor_option"), "--executor-option")
    if options.get("become_user"):
        if "become_user" in out:
            raise ValidationError("give --become-user or --executor-option become_user, "
                                  "not both")
        out["become_user"] = options["become_user"]
    return out
