"""How one job runs inside a child process, from an :class:`Order` to an :class:`Outcome`.

1. Look the action up (``tasks.get_action``); an unknown action fails for good.
2. Validate the task's parameters with the action (secret references stay references).
3. Build the executor the task names (cached per executor name and options).
4. Open a session on the host and run the action with the task's timeout; the action resolves
   the secrets now, on this worker, and teaches the job's redactor each value.
5. Mask those values in every message this module writes itself (connection errors, crashes),
   cap the output, report the outcome: exit code and output from the step that decided it
   (``workers.results.job_outcome``).
6. Meanwhile, with a publisher, hand every line the job's commands print to it, masked by the
   same redactor (``workers.liveout``: ``tasks output --follow``).

Nothing here changes the queue: the master owns every queue transition (the publisher's
thread only appends to the tasks' output streams, best effort).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from scheduler.config import Settings
from scheduler.errors import (
    AuthenticationError,
    BecomeError,
    ConfigError,
    HostKeyError,
    SftpUnavailableError,
    ValidationError,
)
from scheduler.logs import job_context
from scheduler.redact import LockedRedactor, Redactor, SharedRedactor
from tasks.executors.live import publishing
from tasks.host import Executor, Host
from workers.liveout import Publisher
from workers.protocol import Order, Outcome
from workers.results import job_outcome

# Failures that trying again cannot cure: a wrong host key, refused credentials, sudo asking
# for a password (become), a host without SFTP, and a configuration the worker refuses (a ProxyCommand in ssh_config,
# a bad jump host, a missing identity file, a bad executor option, a become method other than sudo). By class, and by name for plugins that raise look-alikes of their own.
PERMANENT_CLASSES: tuple[type[Exception], ...] = (
    HostKeyError, AuthenticationError, BecomeError, ConfigError, ValidationError,
    SftpUnavailableError)
PERMANENT_ERRORS: tuple[str, ...] = tuple(c.__name__ for c in PERMANENT_CLASSES)


class JobError(Exception):
    """A job cannot run; ``retryable`` says whether trying again could help."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def host_from(name: str, data: dict[str, str]) -> Host:
    """The executor's :class:`Host` from a ``P:host:<name>`` hash."""
    try:
        port = int(data.get("port") or 22)
        raw_vars = data.get("vars") or "{}"
        host_vars = json.loads(raw_vars) if isinstance(raw_vars, str) else dict(raw_vars)
    except (ValueError, TypeError) as exc:
        raise JobError(f"host {name!r} has unusable connection data ({exc})", retryable=False) from None
    return Host(name=name, address=data.get("address") or None, port=port,
                user=data.get("user") or None, vars=host_vars)


class Runner:
    """Runs orders in the calling thread; one per child process, shared by its threads."""

    def __init__(self, settings: Settings, node_redactor: LockedRedactor | None = None,
                 publisher: Publisher | None = None) -> None:
        self.settings = settings
        self.node_redactor = node_redactor or LockedRedactor()
        self.publisher = publisher  # the job's lines published live (``workers.liveout``)
        self._executors: dict[str, Executor] = {}
        self._lock = threading.Lock()

    def executor(self, name: str, options: dict[str, Any]) -> Executor:
        key = name + "\0" + json.dumps(options, sort_keys=True, default=str)
        with self._lock:
            found = self._executors.get(key)
            if found is None:
                from tasks.executors import build_executor

                try:
                    found = build_executor(name, options, self.settings)
                except Exception as exc:  # a bad executor name or option: the spec is wrong
                    raise JobError(f"executor {name!r}: {exc}", retryable=False) from None
                self._executors[key] = found
            return found

    def run(self, order: Order) -> Outcome:
        """Run one order; every line logged meanwhile carries its task, job, host, attempt."""
        with job_context(task=order.task_id, job=order.job_id, host=order.host,
                         attempt=order.attempt):
            return self._outcome(order)

    def _outcome(self, order: Order) -> Outcome:
        started_ms = time.time() * 1000
        t0 = time.monotonic()
        redactor = SharedRedactor(self.node_redactor)
        exit_code, output = None, ""
        error_type = None
        # The lines the job prints go live through the same redactor as its recorded output
        lines = self.publisher.job(order, redactor) if self.publisher is not None else None
        try:
            with publishing(lines):
                result = self._run(order, redactor)
            ok, error, retryable = result.ok, result.error, result.retryable
            exit_code, output = job_outcome(result)
        except JobError as exc:
            ok, error, retryable = False, str(exc), exc.retryable
        except Exception as exc:  # a connection failure, or an action bug: never kill the child
            name = error_type = type(exc).__name__
            ok, error = False, f"{name}: {exc}"
            retryable = not (isinstance(exc, PERMANENT_CLASSES) or name in PERMANENT_ERRORS)
        duration_ms = int((time.monotonic() - t0) * 1000)
        if lines is not None:
            lines.end()
        return Outcome(
            job_id=order.job_id, token=order.token, ok=ok,
            exit_code=exit_code, duration_ms=duration_ms, output=output,
            error=redactor.redact(error) if error else None,
            retryable=retryable, started_ms=started_ms, error_type=error_type,
            streamed=lines is not None and lines.published,
        )

    def _run(self, order: Order, redactor: Redactor) -> Any:
        import tasks
        from tasks.base import ActionContext

        spec = order.spec
        action_name = spec.get("action")
        if not action_name:
            raise JobError("the task's spec names no action", retryable=False)
        try:
            action = tasks.get_action(action_name)
        except Exception:
            raise JobError(f"unknown action {action_name!r}", retryable=False) from None
        try:
            params = action.validate(dict(spec.get("params") or {}))
        except Exception as exc:
            # ValidationError already reads "action <name>: ..."; name the action only once
            message = str(exc)
            if not message.startswith(f"action {action_name}"):
                message = f"parameters of {action_name}: {message}"
            raise JobError(message, retryable=False) from None
        host = host_from(order.host, order.host_data)
        executor = self.executor(spec.get("executor") or action.default_executor,
                                 dict(spec.get("executor_options") or {}))
        # the ssh executor reads a become password now and teaches it to the job's redactor
        opened = (lambda: executor.session(host, redactor=redactor)) if executor.name == "ssh" \
            else (lambda: executor.session(host))
        ctx = ActionContext(reconnect=opened, redactor=redactor)
        with opened() as session:
            return action.run(session, host, params, order.timeout_s, ctx)
