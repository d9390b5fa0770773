"""Turning what an action did into what the queue records: exit code and capped output.

The queue's ``output`` field is JSON of the captured head and tail of each command's stdout
and stderr, with the bytes cut between them (docs/architecture.md, "Events"). The action has already masked every secret value it
resolved (``scheduler.redact.Redactor``) in the results it returns.

An action that reports its steps (``tasks.base.Step``: every ``BaseAction``) gets one record
per step, commands and file operations alike, each with its ``step`` name; the step that
decided the outcome carries ``"decides": true`` and gives the job its exit code
(:func:`job_outcome`). The list stays a list of command records, so older readers (and the
record's ``stored_output``) take it as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from scheduler.queue.types import OUTPUT_MAX
from tasks.host import CommandResult

if TYPE_CHECKING:
    from tasks.base import ActionResult, Step

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
    if r.error:
        rec["error"] = r.error
    return rec


def _step_record(st: Step, limit: int | None, decides: bool) -> dict[str, Any]:
    rec = {"step": st.name}
    if st.result is not None:
        rec.update(_command_record(st.result, limit))
    else:
        rec.update({"command": st.command, "exit_code": st.exit_code,
                    "duration_ms": int(st.duration_s * 1000)})
    if st.error:
        rec["error"] = st.error
    if st.note:
        rec["note"] = st.note
    if st.file:
        rec["file"] = True
    if st.cleanup:
        rec["cleanup"] = True
    if decides:
        rec["decides"] = True
    return rec


def _result_of(item: CommandResult | Step) -> CommandResult | None:
    return item if isinstance(item, CommandResult) else item.result


def output_json(items: Iterable[CommandResult | Step], budget: int = OUTPUT_JSON_MAX,
                deciding: int | None = None) -> str:
    """JSON list of per-command (or per-step) records (always valid JSON), at most ``budget``
    characters: each stream's head and tail as captured, its size in bytes and the bytes cut
    between them (``<stream>_cut``); ``deciding`` is the index of the step that decided."""
    items = list(items)
    if not items:
        return ""
    order = list(range(len(items)))

    def dump(keep: list[int], limit: int | None) -> str:
        return json.dumps([
            _command_record(items[i], limit) if isinstance(items[i], CommandResult)
            else _step_record(items[i], limit, i == deciding) for i in keep], ensure_ascii=False)

    limit: int | None = None
    results = [r for r in map(_result_of, items) if r is not None]
    while True:
        text = dump(order, limit)
        if len(text) <= budget or (limit is not None and limit <= 64) or not results:
            break
        longest = max(len(getattr(r, f"{s}_{p}").encode()) for r in results
                      for s in STREAMS for p in ("head", "tail"))
        limit = max(64, (longest if limit is None else limit) // 2)
    # Too many commands even with tiny fields: keep the last ones, which explain the end, and
    # always the deciding step.
    keep_others = 1 if deciding is None else 0
    while len(text) > budget:
        others = [i for i in order if i != deciding]
        if len(others) <= keep_others:
            break
        dropped = set(others[:max(1, len(others) // 2)])
        order = [i for i in order if i not in dropped]
        text = dump(order, limit)
    return text


def exit_code_of(results: Sequence[CommandResult], ok: bool = False) -> int | None:
    """The exit code of a job whose action reports no steps: a failed job's first failing
    command's, else the last command's."""
    if not ok:
        for r in results:
            if not r.ok:
                return r.exit_code
    return results[-1].exit_code if results else None


def job_outcome(result: ActionResult) -> tuple[int | None, str]:
    """The job's exit code and output JSON: those of the deciding step when the action reports
    steps (none decided: no exit code), else :func:`exit_code_of` over its commands."""
    steps = getattr(result, "steps", ())
    if steps:
        deciding = getattr(result, "deciding", None)
        code = None if deciding is None else steps[deciding].exit_code
        return code, output_json(steps, deciding=deciding)
    results = list(result.results)
    return exit_code_of(results, result.ok), output_json(results)
