"""The output format of a job's attempt, read back: the per-command records workers write
(``workers/results.py``: each stream's head and tail, its size in bytes, the bytes cut between
them) turned into the lines ``jobs show``, ``tasks output`` and ``tasks watch`` print.

Lines end at a newline only: a carriage return, a form feed or a C1 NEL stays inside its line,
so the views can show it (``scheduler.visible``) and ``--output json`` keeps it.

Records of an action's steps carry the step's name (``step``), and the one that decided the
job's outcome ``"decides": true``: the job's output (``tasks output``, ``tasks wait``,
``tasks watch``) is that step's (:func:`job_records`); ``jobs show`` lists every step.
"""

from __future__ import annotations

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


__all__ = ["STREAMS", "cut_note", "job_records", "output_lines", "step_summary"]
