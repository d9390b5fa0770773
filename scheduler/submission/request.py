"""The one mapping from an operator's input to a :class:`TaskRequest`.

``fleetsched submit`` options, ``schedules add`` options and the keys of a task file say the
same things; each front end turns its own syntax (``--param NAME=VALUE`` pairs, YAML nodes)
into the task file's keys with plain values, and :func:`task_request` parses those values the
one way: times, durations, limits, the retry backoff, the waves. A value it refuses names the
field as its front end spells it (``flag="--"``: ``--max-concurrency``; ``flag=""``:
``max_concurrency``), and ``locate`` may say where in a file it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.errors import ValidationError
from scheduler.parse import parse_duration, parse_limit, parse_time
from scheduler.submission.submit import TaskRequest

__all__ = ["KEYS", "pairs", "task_request"]

# Everything a task request can say, named as in a task file (the CLI's flags are the same
# words with dashes: max_concurrency is --max-concurrency).
KEYS = ("action", "target", "params", "name", "at", "in", "in_window", "ignore_windows",
        "break_glass", "customer_output", "max_concurrency",
        "max_failures", "count_failures", "timeout", "retries", "backoff", "priority", "executor",
        "executor_options", "become", "become_user", "idempotent", "allow_overlap", "notify",
        "waves", "wave_order", "wave_pause", "wave_gate", "wave_check", "wave_seed")
WAVE_KEYS = ("waves", "wave_order", "wave_pause", "wave_gate", "wave_check", "wave_seed")

Locate = Callable[[str, ValidationError], ValidationError]


def pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """``NAME=VALUE`` options as a mapping; a malformed or repeated name is refused."""
    out: dict[str, str] = {}
    for raw in values or []:
        key, sep, value = raw.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValidationError(f"{option} {raw!r} is not NAME=VALUE",
                                  hint=f"e.g. {option} cmd='uptime'")
        if key in out:
            raise ValidationError(f"{option} {key} is given twice")
        out[key] = value
    return out


def task_request(given: Mapping[str, Any], *, flag: str = "--",
                 locate: Locate | None = None) -> TaskRequest:
    """A request from ``given``, keyed by :data:`KEYS` (absent or None: the default). Times,
    durations, limits and wave options are text as typed; ``params`` and ``executor_options``
    mappings (``become``/``become_user`` already in them); ``notify`` a sequence of targets."""

    def name(key: str) -> str:
        return f"--{key.replace('_', '-')}" if flag == "--" else key

    def parsed(key: str, parse: Callable[[str, str], Any]) -> Any:
        text = given.get(key)
        if not text:
            return None
        try:
            return parse(text, name(key))
        except ValidationError as exc:
            raise (exc if locate is None else locate(key, exc)) from None

    # In the order the CLI always checked them: the first bad value is the one reported.
    at = parsed("at", lambda t, _n: parse_time(t))
    delay = parsed("in", parse_duration)
    max_concurrency = parsed("max_concurrency", parse_limit)
    max_failures = parsed("max_failures", parse_limit)
    timeout = parsed("timeout", parse_duration)
    backoff = parsed("backoff", lambda t, n: 0.0 if t in ("0", "0s")
                     else parse_duration(t, n).total_seconds())
    return TaskRequest(
        action=given["action"], target=given["target"], params=dict(given.get("params") or {}),
        at=at, delay=delay,
        in_window=bool(given.get("in_window")), ignore_windows=bool(given.get("ignore_windows")),
        break_glass=given.get("break_glass"), customer_output=bool(given.get("customer_output")),
        max_concurrency=max_concurrency, max_failures=max_failures,
        count_failures=given.get("count_failures") or "attempts",
        timeout_s=None if timeout is None else timeout.total_seconds(),
        retries=given.get("retries"),
        backoff_s=backoff,
        name=given.get("name"), priority=given.get("priority") or "normal",
        executor=given.get("executor"),
        executor_options=dict(given.get("executor_options") or {}),
        idempotent=given.get("idempotent"), allow_overlap=given.get("allow_overlap"),
        notify=tuple(given.get("notify") or ()),
        waves=_waves(given, flag, locate))


def _waves(given: Mapping[str, Any], flag: str, locate: Locate | None) -> Any:
    from scheduler.submission.waves import wave_spec

    try:
        return wave_spec(given.get("waves"), order=given.get("wave_order"),
                         pause=given.get("wave_pause"), gate=given.get("wave_gate"),
                         check=given.get("wave_check"), seed=given.get("wave_seed"), flag=flag)
    except ValidationError as exc:
        if locate is None:
            raise
        raise locate("waves", exc) from None
