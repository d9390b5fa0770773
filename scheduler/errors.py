"""The error tree of fleetsched, and the negative codes the Lua scripts return.

One base error, a shallow tree, one docstring per class. Job outcomes (a job that should be
retried, a job that failed for good) are results, not exceptions; the classes here are for
infrastructure problems and for bad input from an operator.
"""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    """Status codes returned by the Lua scripts (0 or positive means success)."""

    OK = 0
    STALE_TOKEN = -1  # the job was claimed again since this worker's claim (fencing token moved)
    UNKNOWN_JOB = -2  # no such job in Redis
    UNKNOWN_TASK = -3  # no such task in Redis
    BAD_ARGUMENT = -4  # an argument failed validation inside the script
    NOT_RUNNING = -5  # the job is not running, so it cannot be acked, failed, extended or deferred
    TASK_NOT_ACTIVE = -7  # the task is cancelled or aborted, or the transition does not apply


class FleetschedError(Exception):
    """Base of every error fleetsched raises on purpose.

    ``hint`` is one line telling the operator what to do about it; the CLI prints it after the
    message as ``hint: ...``.
    """

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class ConfigError(FleetschedError):
    """The configuration is invalid or contradicts itself."""

    exit_code = 2


class ValidationError(FleetschedError):
    """Operator input (an argument, a file, an expression) is malformed. Nothing was written."""

    exit_code = 2


class NotFoundError(FleetschedError):
    """The task, job, host, window or schedule named does not exist."""

    exit_code = 4


class RedisUnavailableError(FleetschedError):
    """Redis cannot be reached, or refuses to serve as a queue (for example it may evict keys)."""


class RedisUnsafeError(RedisUnavailableError):
    """Redis answers, or could be started, but would lose queued jobs: it may evict keys, or the
    embedded server's data is in a form the ``redis-server`` at hand cannot read. Waiting does
    not help, so a submission refuses before it records anything."""


class DatabaseUnavailableError(FleetschedError):
    """The SQL database cannot be reached."""


class QueueLostError(FleetschedError):
    """Redis lost or replaced the queue's data: its epoch is gone or another than the one SQL
    records, or it holds none of the tasks SQL calls active (``scheduler.record.epoch``). A
    worker node refuses to start on such a queue until ``fleetsched reconcile`` has run."""


class QueueError(FleetschedError):
    """A queue script refused an operation; ``code`` says why."""

    def __init__(self, code: Code, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.code = code


class StaleTokenError(QueueError):
    """The job was claimed again by another worker: this worker's lease is gone."""


class UnknownJobError(QueueError, NotFoundError):
    """The job does not exist in Redis."""

    exit_code = 4


class UnknownTaskError(QueueError, NotFoundError):
    """The task does not exist in Redis."""

    exit_code = 4


class BadArgumentError(QueueError, ValidationError):
    """A queue script rejected an argument; nothing was changed."""

    exit_code = 2


class TaskNotActiveError(QueueError, ValidationError):
    """The task's state refuses the operation (resume a cancelled task, retry the failed jobs
    of a cancelled one); nothing was changed."""

    exit_code = 2


class HostKeyError(FleetschedError):
    """A host presented an unknown or changed SSH host key; nothing was executed."""


class HostUnreachableError(FleetschedError):
    """A host could not be reached, or its connection broke before the command started.

    Connect, banner and handshake failures and timeouts; nothing was executed, so a retry is
    safe.
    """


class SftpUnavailableError(FleetschedError):
    """A host's sshd refused the ``sftp`` subsystem (no ``Subsystem sftp`` line, or its program
    is missing): the host is reachable, but no file can be put there over SFTP, and trying
    again asks the same question. Commands still run."""

    MESSAGE = "SFTP is not available on the host"


class AuthenticationError(FleetschedError):
    """A host refused every key offered (agent, identity files); nothing was executed."""


class BecomeError(FleetschedError):
    """``sudo -n`` on a host refused to run a command as the become user without a password;
    the command did not run, and trying again asks the same question."""


class UnauthenticatedError(FleetschedError):
    """A request to the HTTP API names no principal: no token, or one that is malformed,
    unknown, expired or revoked. The message never repeats the token."""


class ForbiddenError(FleetschedError):
    """The principal is known but its role (or tenant scope) does not allow the verb."""


class ConflictError(ValidationError):
    """A repeated request names the idempotency key of an earlier one but asks for something
    else (or a name a live record already holds). Nothing was written."""


class DeclinedError(FleetschedError):
    """The operator declined a confirmation, or the operation was cancelled."""

    exit_code = 5


ERROR_FOR_CODE: dict[Code, type[QueueError]] = {
    Code.STALE_TOKEN: StaleTokenError,
    Code.UNKNOWN_JOB: UnknownJobError,
    Code.UNKNOWN_TASK: UnknownTaskError,
    Code.BAD_ARGUMENT: BadArgumentError,
    Code.NOT_RUNNING: QueueError,
    Code.TASK_NOT_ACTIVE: TaskNotActiveError,
}


def error_for(code: int, message: str) -> QueueError:
    """The typed exception for a negative script code."""
    c = Code(code)
    return ERROR_FOR_CODE.get(c, QueueError)(c, message)
