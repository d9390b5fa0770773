"""Path parameters that name a row of the record, bounded as the record stores them: a task id
is a positive 64-bit integer, so a larger number is refused (422) before any query (SQLite
cannot even bind one past 2**63 - 1; such a request was a 500)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

__all__ = ["TaskId"]

TaskId = Annotated[int, Path(ge=1, le=2**63 - 1, description="A task's id.")]
