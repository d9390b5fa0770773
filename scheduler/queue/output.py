"""The output format of a job's attempt, read back: the per-command records workers write
(``workers/results.py``: each stream's head and tail, its size in bytes, the bytes cut between
them) turned into the lines ``jobs show``, ``tasks output`` and ``tasks watch`` print.

Lines end at a newline only: a carriage return, a form feed or a C1 NEL stays inside its line,
so the views can show it (``scheduler.visible``) and ``--output json`` keeps it.

Records of an action's steps carry the step's name (``step``), and the one that decided the
job's outcome ``"decides": true``: the job's output (``tasks output``, ``tasks wait``,
``tasks watch``) is that step's (:func:`job_records`); ``jobs show`` lists every step.

:func:`attempt_lines` is the one reader of what a failed attempt printed for ``tasks output``,
``tasks wait`` and ``tasks watch``; :func:`shown_exit` the one way its exit code is printed (a
signal's name for a command killed by one).
"""

from __future__ import annotations

import re
from typing import Any

STREAMS = ("stdout", "stderr")


def cut_note(cmd: dict[str, Any], stream: str) -> str | None:
    """The line standing for what was cut between a stream's head and tail, in words."""
    head, tail = cmd.get(f"{stream}_head") or "", cmd.get(f"{stream}_tail") or ""
    total = int(cmd.get(f"{stream}_bytes") or 0)
    kept_head, kept_tail = len(head.encode()), len(tail.encode())
    cut = int(cmd.get(f"{stream}_cut") or 0)  # counted by the worker on the raw bytes
    if cut <= 0:
        return None
    return (f"[... {cut:,} bytes cut here: the {stream} had {total:,} bytes, of which the first "
            f"{kept_head:,} and the last {kept_tail:,} were kept ...]")


def output_lines(commands: list[dict[str, Any]], streams: tuple[str, ...] = STREAMS) -> list[str]:
    """The printed lines of an attempt's commands: head, a line saying how much was cut, tail
    (split at newlines only, see the module docstring)."""
    lines: list[str] = []
    for cmd in commands:
        for stream in streams:
            head, tail = cmd.get(f"{stream}_head") or "", cmd.get(f"{stream}_tail") or ""
            text = head
            note = cut_note(cmd, stream)
            if note:
                text += ("" if text.endswith("\n") or not text else "\n") + note + "\n"
            text += tail
            split = text.split("\n")
            if split[-1] == "":
                split.pop()  # the newline that ends the last line starts no line of its own
            for line in split:
                lines.append(line if stream == "stdout" else f"[stderr] {line}")
    return lines


def job_records(commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that make a job's output: the deciding step's when the records are steps
    (none when no step decided: the job's error says what did); every record otherwise
    (output written before steps were recorded, or by an action that reports none)."""
    if not any("step" in cmd for cmd in commands):
        return commands
    return [cmd for cmd in commands if cmd.get("decides")]


def step_summary(cmd: dict[str, Any]) -> str:
    """One line for a step: its name, how it ended and how long it took."""
    code = cmd.get("exit_code")
    if cmd.get("timed_out"):
        ended = "timed out"
    elif code is None:
        ended = "failed" if cmd.get("error") else "no exit code"
    else:
        ended = f"exit {code}"
    parts = [ended] + ([f"{cmd['duration_ms']} ms"] if cmd.get("duration_ms") is not None else [])
    if cmd.get("cleanup"):
        parts.append("cleanup")
    return f"{cmd.get('step') or '?'}: " + ", ".join(parts)


def commands_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-command records of an end event's ``output`` field (an older event's plain text
    as one command's stdout)."""
    out = data.get("output")
    if isinstance(out, list):
        return [c for c in out if isinstance(c, dict)]
    if isinstance(out, str) and out:
        return [{"command": "", "stdout_tail": out}]
    return []


def attempt_lines(commands: list[dict[str, Any]], error: str | None) -> list[str]:
    """What one attempt printed, as ``tasks output`` shows it (stderr marked, the deciding
    step of an action that reports steps), or its error when it printed nothing: the one
    reader of a failed host's lines for ``tasks output``, ``tasks wait`` and ``tasks watch``."""
    lines = output_lines(job_records(commands))
    if not lines and error:
        lines = [f"[error] {error}"]
    return lines


# The ssh executor's error for a command sshd reported killed by a signal (exitsignal.py); the
# record keeps the exit code empty (its column is an int), the views show the signal from here.
_KILLED = re.compile(r"\bkilled by signal (SIG[A-Z0-9]+)\b")


def shown_exit(exit_code: Any, error: str | None) -> str:
    """An exit code as the views print it: the code, a signal's name (``SIGKILL``) for a command
    killed by one, or "" when there is neither."""
    if exit_code not in (None, ""):
        return str(exit_code)
    killed = _KILLED.search(error or "")
    return killed.group(1) if killed else ""


__all__ = ["STREAMS", "attempt_lines", "commands_of", "cut_note", "job_records", "output_lines",
           "shown_exit", "step_summary"]
