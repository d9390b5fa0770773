"""Turning what an action did into what the queue records: exit code and capped output.

The queue's ``output`` field is JSON of a capped head and tail of each command's stdout and
stderr (docs/architecture.md, "Events"). The action has already masked every secret value it
resolved (``tasks.secrets.Redactor``) in the results it returns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tasks.host import CommandResult

OUTPUT_CAP = 16_384
"""Characters of output JSON one job may record; heads and tails are trimmed to fit."""

FIELD_CAP = 4_096
"""Characters kept of one stdout/stderr head or tail."""


def _cap(text: str, limit: int, keep_end: bool) -> str:
    """A head keeps its start, a tail its end."""
    if len(text) <= limit:
        return text
    if keep_end:
        return f"[{len(text) - limit} more]…" + text[-limit:]
    return text[:limit] + f"…[{len(text) - limit} more]"


def _command_record(r: CommandResult, cap: int) -> dict[str, Any]:
    rec: dict[str, Any] = {"command": r.command, "exit_code": r.exit_code,
                           "duration_ms": int(r.duration_s * 1000)}
    for name in ("stdout_head", "stdout_tail", "stderr_head", "stderr_tail"):
        value = getattr(r, name)
        if value:
            rec[name] = _cap(value, cap, keep_end=name.endswith("_tail"))
    if r.stdout_bytes:
        rec["stdout_bytes"] = r.stdout_bytes
    if r.stderr_bytes:
        rec["stderr_bytes"] = r.stderr_bytes
    if r.timed_out:
        rec["timed_out"] = True
    if r.simulated:
        rec["simulated"] = True
    return rec


def output_json(results: Iterable[CommandResult]) -> str:
    """JSON list of per-command records, at most :data:`OUTPUT_CAP` characters."""
    results = list(results)
    if not results:
        return ""
    cap = FIELD_CAP
    while True:
        text = json.dumps([_command_record(r, cap) for r in results], ensure_ascii=False)
        if len(text) <= OUTPUT_CAP or cap <= 64:
            break
        cap //= 2
    if len(text) > OUTPUT_CAP:
        # Too many commands even with tiny fields: keep the last ones, which explain the end.
        while len(results) > 1 and len(text) > OUTPUT_CAP:
            results = results[len(results) // 2:]
            text = json.dumps([_command_record(r, cap) for r in results], ensure_ascii=False)
    return text


def exit_code_of(results: Sequence[CommandResult]) -> int | None:
    """The job's exit code: the first failing command's, else the last command's."""
    for r in results:
        if not r.ok:
            return r.exit_code
    return results[-1].exit_code if results else None
