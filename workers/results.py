"""Turning what an action did into what the queue records: exit code and capped output.

The queue's ``output`` field is JSON of the captured head and tail of each command's stdout
and stderr, with the bytes cut between them (docs/architecture.md, "Events"). The action has already masked every secret value it
resolved (``tasks.secrets.Redactor``) in the results it returns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from scheduler.queue.types import OUTPUT_MAX
from tasks.host import CommandResult

OUTPUT_JSON_MAX = OUTPUT_MAX
"""Characters of output JSON one attempt may record (the queue's limit of an event's output): with the default capture (8 KiB of head
and 8 KiB of tail per stream) that is several commands' worth; beyond it, every head and tail
is trimmed further (on character boundaries, the cut bytes counted) until it fits."""

STREAMS = ("stdout", "stderr")


def _trim(text: str, limit: int, keep_end: bool) -> str:
    """At most ``limit`` UTF-8 bytes of ``text``: its start (a head) or its end (a tail),
    never a character cut in two."""
    data = text.encode()
    if len(data) <= limit:
        return text
    part = data[len(data) - limit:] if keep_end else data[:limit]
    return part.decode("utf-8", errors="ignore")


def _command_record(r: CommandResult, limit: int | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"command": r.command, "exit_code": r.exit_code,
                           "duration_ms": int(r.duration_s * 1000)}
    for stream in STREAMS:
        head, tail = getattr(r, f"{stream}_head"), getattr(r, f"{stream}_tail")
        # The capture counted what it cut on the raw bytes; trimming here adds what it drops
        # (never recomputed from the text, which masking and replacement characters change).
        cut = getattr(r, f"{stream}_cut")
        if limit is not None:
            short_head, short_tail = _trim(head, limit, False), _trim(tail, limit, True)
            cut += (len(head.encode()) - len(short_head.encode())
                    + len(tail.encode()) - len(short_tail.encode()))
            head, tail = short_head, short_tail
        total = getattr(r, f"{stream}_bytes")
        if head:
            rec[f"{stream}_head"] = head
        if tail:
            rec[f"{stream}_tail"] = tail
        if total:
            rec[f"{stream}_bytes"] = total
        if cut > 0:
            rec[f"{stream}_cut"] = cut
    if r.timed_out:
        rec["timed_out"] = True
    if r.simulated:
        rec["simulated"] = True
    return rec


def output_json(results: Iterable[CommandResult], budget: int = OUTPUT_JSON_MAX) -> str:
    """JSON list of per-command records (always valid JSON), at most ``budget`` characters:
    each stream's head and tail as captured, its size in bytes and the bytes cut between
    them (``<stream>_cut``)."""
    results = list(results)
    if not results:
        return ""
    limit: int | None = None
    while True:
        text = json.dumps([_command_record(r, limit) for r in results], ensure_ascii=False)
        if len(text) <= budget or (limit is not None and limit <= 64):
            break
        longest = max(len(getattr(r, f"{s}_{p}").encode()) for r in results
                      for s in STREAMS for p in ("head", "tail"))
        limit = max(64, (longest if limit is None else limit) // 2)
    if len(text) > budget:
        # Too many commands even with tiny fields: keep the last ones, which explain the end.
        while len(results) > 1 and len(text) > budget:
            results = results[len(results) // 2:]
            text = json.dumps([_command_record(r, limit) for r in results], ensure_ascii=False)
    return text


def exit_code_of(results: Sequence[CommandResult]) -> int | None:
    """The job's exit code: the first failing command's, else the last command's."""
    for r in results:
        if not r.ok:
            return r.exit_code
    return results[-1].exit_code if results else None
