"""The API's OpenAPI document as published in ``docs/api/openapi.json``: the app's own document
(``/api/v1/openapi.json``), as indented JSON with a final newline, so the committed file and
``fleetsched server --openapi`` compare byte for byte (tests/server/test_openapi_published.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.config import Settings

__all__ = ["PUBLISHED", "REGENERATE", "document"]

PUBLISHED = "docs/api/openapi.json"
REGENERATE = f"fleetsched server --openapi > {PUBLISHED}"


def document(settings: Settings) -> str:
    """The OpenAPI document of the app ``settings`` would serve (nothing is opened)."""
    from scheduler.server.app import create_app

    return json.dumps(create_app(settings).openapi(), indent=2, ensure_ascii=False) + "\n"
