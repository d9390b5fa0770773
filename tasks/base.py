"""The action model: what an action declares, what running one returns, and the step runner.

What it owns:

1. :class:`Action`, the protocol every action (built-in or plugin) meets: declared parameters,
   ``idempotent``, ``requires_window``, ``expected_ms``, ``default_executor``, ``validate()``
   and ``run()``;
2. :class:`ActionResult` and :class:`ActionContext` (the run-time extras: a way to reconnect
   to the host, the job's secret :class:`~scheduler.redact.Redactor`);
3. :class:`BaseAction`, the usual way to write one: declare ``params``, implement
   ``execute(steps, host, params, ctx)``; the base validates, resolves secrets, turns failures
   into results, and redacts every result before it is returned;
4. :class:`Steps`, an action's bookkeeping while it runs: the session (replaced after a
   reconnect), the deadline, every step (a command or a file operation) as a :class:`Step`,
   cleanup that must not hide the failure;
5. the deciding step: the step that failed (or whose output a check refused), or on success the
   last step that is not cleanup. The job's exit code and output are that step's
   (``ActionResult.deciding``); the other steps are recorded beside it.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from scheduler.errors import BecomeError, SftpUnavailableError, ValidationError
from scheduler.redact import Redactor
from tasks.argv import PlaceholderError, render
from tasks.host import CommandResult, Host, HostSession
from tasks.params import Param, validate_params
from tasks.secrets import SecretError, resolve

__all__ = [
    "Action", "ActionContext", "ActionResult", "BaseAction", "Step", "StepFailed", "Steps",
]

log = logging.getLogger("fleetsched.actions")

# How much of a failed command's stderr (last non-empty line) goes into the error message.
ERROR_EXCERPT = 200
# Cleanup (removing a temporary file) gets this long even when the job's own time ran out.
CLEANUP_TIMEOUT_S = 15.0

T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """One step of an action, as the job records it: a command (``result``) or a file
    operation (``file``: ``put``, ``rename``, ``remove`` through the session; ``command`` says
    what, e.g. ``put PATH``)."""

    name: str  # what the action calls it: "pre-check", "upload the file"
    command: str
    result: CommandResult | None = None
    duration_s: float = 0.0
    error: str | None = None  # why it failed, when that is not an exit code (never a secret)
    cleanup: bool = False  # runs after the outcome is decided (removing temporary files)
    note: str | None = None  # why a step that did not fail has no exit code (a reboot's drop)
    file: bool = False  # a file operation, not a command

    @property
    def exit_code(self) -> int | None:
        """The command's exit code; a file operation counts 0 when it succeeded (as SFTP's
        ``SSH_FX_OK``) and None when it failed (``error`` says why); a step with a ``note``
        has none."""
        if self.result is not None:
            return self.result.exit_code
        return None if self.error or self.note else 0


@dataclass(frozen=True)
class ActionResult:
    """What an action did on one host."""

    ok: bool
    results: list[CommandResult]  # every command's result, in order (see ``steps``)
    error: str | None = None  # one line for the operator; never a secret (redacted)
    retryable: bool = True  # False: running it again cannot help (bad input, wrong version)
    changed: bool | None = None  # False: the host already was as wanted; None: unknown
    warnings: tuple[str, ...] = ()  # e.g. a cleanup that failed after the work succeeded
    steps: tuple[Step, ...] = ()  # every step, commands and file operations, in order
    deciding: int | None = None  # index in ``steps`` of the step that decided the outcome


@dataclass
class ActionContext:
    """Run-time extras the worker hands to an action.

    ``reconnect`` opens a fresh session on the same host (the worker passes
    ``lambda: executor.session(host)``); actions that reboot a host use it to come back.
    ``redactor`` learns the job's secret values; the worker attaches a
    :class:`~scheduler.redact.RedactingFilter` with it to its log handlers.
    """

    reconnect: Callable[[], AbstractContextManager[HostSession]] | None = None
    redactor: Redactor = field(default_factory=Redactor)
    sleep: Callable[[float], None] = time.sleep


@runtime_checkable
class Action(Protocol):
    """What the worker and the CLI need from an action (built-in or plugin)."""

    name: str
    description: str
    idempotent: bool
    requires_window: bool
    expected_ms: int
    default_executor: str
    params: dict[str, Param]

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        """Typed parameters, or :class:`ValidationError` with one line."""
        ...

    def run(self, session: HostSession, host: Host, params: dict[str, Any], timeout_s: float,
            ctx: ActionContext | None = None) -> ActionResult:
        """Do the work on one host; ``params`` as ``validate`` returned them (secret references
        unresolved). Never raises for a job failure: that is a result."""
        ...


class StepFailed(Exception):
    """A step of an action failed; the action stops (after its cleanup) with this message.

    ``step`` is the step that decided the failure: set by :meth:`Steps.run` for a failing
    command; an action that refuses a step's output (a wrong checksum or version) passes
    ``steps.last``. None: no step decided it (a local file missing, a bad parameter)."""

    def __init__(self, message: str, retryable: bool = True, step: Step | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.step = step


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= ERROR_EXCERPT else line[:ERROR_EXCERPT] + "..."


class Steps:
    """The bookkeeping of one running action (see the module docstring, points 4 and 5)."""

    def __init__(self, session: HostSession, host: Host, timeout_s: float,
                 ctx: ActionContext) -> None:
        self.session = session
        self.host = host
        self.ctx = ctx
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.results: list[CommandResult] = []
        self.steps: list[Step] = []
        self.warnings: list[str] = []
        self.changed: bool | None = None
        self.failed: Step | None = None  # the last non-cleanup step that raised

    @property
    def last(self) -> Step | None:
        """The step recorded last (pass it to :class:`StepFailed` when refusing its output)."""
        return self.steps[-1] if self.steps else None

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def render(self, argv: Sequence[Any], extra: dict[str, str] | None = None) -> list[str]:
        """An argv parameter with its ``{host.*}`` (and ``extra``) placeholders filled in."""
        try:
            return render(argv, self.host, extra)
        except PlaceholderError as exc:
            raise StepFailed(str(exc), retryable=False) from None

    def record(self, step: Step) -> Step:
        """Keep ``step`` (and its command's result); a main step that raised is remembered."""
        self.steps.append(step)
        if step.result is not None:
            self.results.append(step.result)
        if step.error and not step.cleanup:
            self.failed = step
        return step

    def run(self, argv: list[str], what: str, *, stdin: bytes | None = None, check: bool = True,
            timeout: float | None = None, cleanup: bool = False) -> CommandResult:
        """Run ``argv`` on the host within the action's deadline; with ``check``, a non-zero
        exit raises :class:`StepFailed` naming ``what`` and the last line of stderr.
        ``cleanup`` steps get :data:`CLEANUP_TIMEOUT_S` even after the deadline passed."""
        left = self.remaining()
        if cleanup:
            left = max(left, CLEANUP_TIMEOUT_S)
        if left <= 0:
            raise StepFailed(f"{what}: the job's timeout of {self.timeout_s:g}s ran out")
        shown = self.ctx.redactor.redact(shlex.join(argv))  # masked before it is even logged
        log.debug("%s: %s: %s", self.host.name, what, shown)
        start = time.monotonic()
        try:
            result = self.session.run(argv, timeout=min(timeout or left, left), stdin=stdin)
        except Exception as exc:
            self.record(Step(what, shlex.join(argv), None, time.monotonic() - start,
                             error=_describe(exc), cleanup=cleanup))
            raise
        step = self.record(Step(what, result.command, result, result.duration_s,
                                cleanup=cleanup))
        log.debug("%s: %s: exit %s after %.2fs%s", self.host.name, what, result.exit_code,
                  result.duration_s, " (timed out)" if result.timed_out else "")
        if result.timed_out:
            raise StepFailed(f"{what} timed out after {result.duration_s:.1f}s", step=step)
        if result.exit_code is None:
            why = getattr(result, "error", None) or "the connection was lost before it finished"
            raise StepFailed(f"{what}: {why}", step=step)
        if check and result.exit_code != 0:
            excerpt = _last_line(result.stderr_tail or result.stderr_head) or _last_line(
                result.stdout_tail or result.stdout_head)
            raise StepFailed(f"{what} failed (exit {result.exit_code})"
                             + (f": {excerpt}" if excerpt else ""), step=step)
        return result

    def file(self, what: str, command: str, fn: Callable[[], T], *, cleanup: bool = False) -> T:
        """A file operation on the host (``steps.session.put``, ``rename``, ``remove``) as a
        step: ``command`` says what it does (``put PATH``); an exception is recorded and
        raised unchanged."""
        start = time.monotonic()
        try:
            value = fn()
        except Exception as exc:
            self.record(Step(what, command, None, time.monotonic() - start,
                             error=_describe(exc), cleanup=cleanup, file=True))
            raise
        self.record(Step(what, command, None, time.monotonic() - start, cleanup=cleanup,
                         file=True))
        return value

    def cleanup(self, what: str, fn: Callable[[], Any]) -> bool:
        """Run a cleanup step; a failure becomes a warning, never hides the action's own error."""
        try:
            fn()
            return True
        except StepFailed as exc:
            self.warnings.append(f"{what}: {exc}")
        except Exception as exc:  # noqa: BLE001 - cleanup must not raise over the real error
            self.warnings.append(f"{what}: {type(exc).__name__}: {exc}")
        return False

    def deciding(self, failure: BaseException | None) -> int | None:
        """Where in :attr:`steps` the step that decided the outcome is (module docstring,
        point 5): the failure's step, else the step that raised it; on success the last step
        that is not cleanup. None when no step decided (nothing ran, or a local check)."""
        if failure is None:
            main = [i for i, st in enumerate(self.steps) if not st.cleanup]
            return main[-1] if main else None
        step = failure.step if isinstance(failure, StepFailed) else self.failed
        for i, st in enumerate(self.steps):
            if st is step:
                return i
        return None


def _describe(exc: BaseException) -> str:
    """One line for a step that raised: an OS error's text, our own errors' message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, (OSError, StepFailed)) or type(exc).__module__.startswith("scheduler."):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


class BaseAction:
    """The usual base of an action: declare, validate, execute, report (see module docstring)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    idempotent: ClassVar[bool] = True
    # Safe to run on a host while another task's job runs there (read-only checks): its jobs
    # neither wait for a busy host nor hold one. False: one job per host at a time.
    overlap_safe: ClassVar[bool] = False
    requires_window: ClassVar[bool] = False
    expected_ms: ClassVar[int] = 10_000
    default_executor: ClassVar[str] = "ssh"
    params: ClassVar[dict[str, Param]] = {}

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        typed = validate_params(self.name, self.params, params)
        self.check(typed)
        return typed

    def check(self, params: dict[str, Any]) -> None:
        """Rules across parameters; raise :class:`ValidationError` (use :meth:`invalid`)."""

    def invalid(self, message: str, hint: str | None = None) -> ValidationError:
        return ValidationError(f"action {self.name}: {message}", hint)

    def dump(self, params: dict[str, Any]) -> dict[str, Any]:
        """The JSON form of typed parameters (secret references as references), for the queue
        and the database; ``validate(dump(p)) == p``. Unset optional parameters are left out."""
        return {k: self.params[k].type.dump(v) for k, v in params.items() if v is not None}

    def estimate_ms(self, params: dict[str, Any]) -> int:
        """Expected duration with these parameters (window planning); ``expected_ms`` by default."""
        return self.expected_ms

    def describe(self) -> dict[str, Any]:
        """What ``fleetsched actions list/show`` prints."""
        return {
            "name": self.name,
            "description": self.description,
            "idempotent": self.idempotent,
            "overlap_safe": self.overlap_safe,
            "requires_window": self.requires_window,
            "expected_ms": self.expected_ms,
            "default_executor": self.default_executor,
            "params": [p.describe() for p in self.params.values()],
        }

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        raise NotImplementedError

    def run(self, session: HostSession, host: Host, params: dict[str, Any], timeout_s: float,
            ctx: ActionContext | None = None) -> ActionResult:
        ctx = ctx if ctx is not None else ActionContext()
        steps = Steps(session, host, timeout_s, ctx)
        error: str | None = None
        retryable = True
        failure: BaseException | None = None
        try:
            resolved = resolve(params, ctx.redactor)
            self.execute(steps, host, resolved, ctx)
        except StepFailed as exc:
            error, retryable, failure = str(exc), exc.retryable, exc
        except (SecretError, ValidationError, PlaceholderError, BecomeError,
                SftpUnavailableError) as exc:
            error, retryable, failure = str(exc), False, exc
        except Exception as exc:  # noqa: BLE001 - a job failure is a result, not a crash
            error, failure = f"{type(exc).__name__}: {exc}", exc
        if error is not None and steps.warnings:
            error = error + "; " + "; ".join(steps.warnings)
        result = ActionResult(
            ok=error is None, results=steps.results, error=error, retryable=retryable,
            changed=steps.changed, warnings=tuple(steps.warnings), steps=tuple(steps.steps),
            deciding=steps.deciding(failure),
        )
        return ctx.redactor.action_result(result)
