"""Paging of list endpoints: ``limit`` (1 to 1,000, default 100) and ``offset``; the answer is
``{"items": [...], "limit": n, "offset": m, "next_offset": m + n or null}``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

__all__ = ["Limit", "MAX_LIMIT", "Offset", "page"]

MAX_LIMIT = 1000
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Rows per page.")]
Offset = Annotated[int, Query(ge=0, description="Rows to skip.")]


def page(fetched: list[Any], *, limit: int, offset: int) -> dict[str, Any]:
    """The page of ``fetched``: rows from ``offset``, fetched ``limit + 1`` at a time, so that
    one more row than the page says whether there is a next one."""
    return {"items": fetched[:limit], "limit": limit, "offset": offset,
            "next_offset": offset + limit if len(fetched) > limit else None}
