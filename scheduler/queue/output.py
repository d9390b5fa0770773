"""The output format of a job's attempt, read back: the per-command records workers write
(``workers/results.py``: each stream's head and tail, its size in bytes, the bytes cut between
them) turned into the lines ``jobs show``, ``tasks output`` and ``tasks watch`` print.

Lines end at a newline only: a carriage return, a form feed or a C1 NEL stays inside its line,
so the views can show it (``scheduler.visible``) and ``--output json`` keeps it.
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


__all__ = ["STREAMS", "cut_note", "output_lines"]
