"""Executor options: typed reading of the ``options`` dict, rejecting unknown names.

Options arrive from task specs and the CLI as strings or JSON values; each executor declares
the names it knows with a default, and anything else is a one-line ``ValidationError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.errors import ValidationError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def coerce(executor: str, name: str, raw: Any, default: Any) -> Any:
    """``raw`` converted to the type of ``default`` (bool, int, float, str, list of str)."""
    where = f"{executor} executor option {name}={raw!r}"
    if raw is None:
        return default
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValidationError(f"{where} is not a boolean (use true or false)")
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            value = type(default)(raw) if not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is None or value < 0 or value != value:
            raise ValidationError(f"{where} is not a non-negative number")
        return value
    if isinstance(default, list):
        if isinstance(raw, str):
            return [part for part in raw.split(",") if part]
        if isinstance(raw, (list, tuple)) and all(isinstance(p, str) for p in raw):
            return list(raw)
        raise ValidationError(f"{where} is not a list of strings")
    return str(raw)


def read_options(executor: str, options: Mapping[str, Any] | None,
                 defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The options with defaults filled in; an unknown option name is an error."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValidationError(
            f"{executor} executor has no option {unknown[0]!r}",
            hint="known options: " + ", ".join(sorted(defaults)),
        )
    return {name: coerce(executor, name, options.get(name), default)
            for name, default in defaults.items()}


__all__ = ["coerce", "read_options"]
