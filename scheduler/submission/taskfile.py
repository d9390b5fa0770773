"""YAML task files (``fleetsched submit -f task.yaml``): a strict schema, errors with lines.

A task file is one mapping; every key of ``fleetsched submit`` has its place, nothing else::

    action: command                    # required
    target: group:web,!web-07          # required
    params: {cmd: "systemctl reload nginx"}
    name: reload nginx
    at: 2026-12-01T22:00+01:00         # or  in: 10m   (not both)
    in_window: false                   # firmware and other actions that require windows: true
    # ignore_windows: true             # run such an action outside its windows (recorded)
    # break_glass: "INC-4711: ..."     # run through freezes; the reason is recorded
    max_concurrency: 10%               # a number or a percentage of the task's hosts
    max_failures: 2
    timeout: 5m
    retries: 2
    backoff: 10s
    priority: normal                   # urgent | normal | bulk
    executor: ssh                      # ssh | local | simulate
    executor_options: {}
    become: true                       # run through sudo -n (ssh executor option become)
    become_user: postgres              # as this user (default: the host's, else root)
    idempotent: true                   # override the action's own flag
    notify: [mailto:ops@example.org]   # webhook URLs or mailto:, one or a list
    waves: 1,10%,100%                  # roll out in waves (sizes: N or P% of the hosts)
    wave_order: inventory              # inventory | random | by-group
    wave_pause: 10m                    # between waves
    wave_gate: approve                 # none | approve (fleetsched tasks continue)
    wave_check: systemctl is-active nginx   # on each finished wave's hosts
    # wave_seed: 42                    # with wave_order random: the draw a --dry-run showed

An unknown key, a wrong type or a bad value is one line ``file:line: message`` (exit code 2);
nothing is read from the database before the file is accepted. ``params`` values are handed
to the action as YAML gives them (lists stay lists); secrets are references (``@env:NAME``).
"""

from __future__ import annotations

import difflib
import os
from datetime import date, datetime
from typing import Any

import yaml

from scheduler.errors import ValidationError
from scheduler.parse import parse_duration, parse_limit, parse_time
from scheduler.submission.submit import TaskRequest

__all__ = ["KEYS", "MAX_BYTES", "load_task_file", "parse_task_text"]

MAX_BYTES = 1 << 20  # a task file is small; anything bigger is a mistake
KEYS = ("action", "target", "params", "name", "at", "in", "in_window", "ignore_windows",
        "break_glass", "max_concurrency",
        "max_failures", "count_failures", "timeout", "retries", "backoff", "priority", "executor",
        "executor_options", "become", "become_user", "idempotent", "allow_overlap", "notify",
        "waves", "wave_order", "wave_pause", "wave_gate", "wave_check", "wave_seed")
REQUIRED = ("action", "target")
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAPPING = "tag:yaml.org,2002:map"
_SCALAR_TEXT = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


class _Where:
    def __init__(self, source: str) -> None:
        self.source = source

    def __call__(self, node: Any, message: str, hint: str | None = None) -> ValidationError:
        mark = getattr(node, "start_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        return ValidationError(f"{self.source}{line}: {message}", hint)


def load_task_file(path: str | os.PathLike[str]) -> TaskRequest:
    """Read and check a task file; :class:`ValidationError` ``file:line: message`` otherwise."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ValidationError(f"cannot read task file {source}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ValidationError(f"{source}: larger than {MAX_BYTES} bytes; not a task file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    return parse_task_text(text, source)


def parse_task_text(text: str, source: str = "<task file>") -> TaskRequest:
    """A :class:`TaskRequest` from the YAML text of a task file."""
    where = _Where(source)
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ValidationError(f"{source}{line}: not valid YAML ({exc.problem or exc})") from None
    except yaml.YAMLError as exc:
        raise ValidationError(f"{source}: not valid YAML ({exc})") from None
    if node is None:
        raise ValidationError(f"{source}: the file is empty", hint="see docs/guides/submitting-tasks.md")
    if not isinstance(node, yaml.MappingNode):
        raise where(node, "a task file is one mapping (action:, target:, ...)")
    fields: dict[str, tuple[Any, Any]] = {}  # key -> (key node, value node)
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            raise where(key_node, f"unknown key {key!r}",
                        f"did you mean {close[0]!r}?" if close else "keys: " + ", ".join(KEYS))
        if key in fields:
            raise where(key_node, f"key {key!r} appears twice")
        fields[key] = (key_node, value_node)
    for key in REQUIRED:
        if key not in fields:
            raise where(node, f"missing required key {key!r}")
    if "at" in fields and "in" in fields:
        raise where(fields["in"][0], "give 'at' or 'in', not both")
    return _request(fields, where)


def _value(node: Any, where: _Where) -> Any:
    try:
        return yaml.load(yaml.serialize(node), Loader=_LOADER)
    except yaml.YAMLError as exc:  # e.g. an alias cycle; keep it one line
        raise where(node, f"unreadable value ({exc})") from None


def _text(fields: dict, key: str, where: _Where) -> str | None:
    if key not in fields:
        return None
    node = fields[key][1]
    if not isinstance(node, yaml.ScalarNode) or node.tag not in _SCALAR_TEXT or node.value == "":
        raise where(node, f"{key} must be a text value")
    return str(node.value)


def _mapping(fields: dict, key: str, where: _Where) -> dict[str, Any]:
    if key not in fields:
        return {}
    node = fields[key][1]
    if not isinstance(node, yaml.MappingNode):
        raise where(node, f"{key} must be a mapping of name: value")
    value = _value(node, where)
    for k in value:
        if not isinstance(k, str):
            raise where(node, f"{key}: names must be text, not {k!r}")
    return value


def _bool(fields: dict, key: str, where: _Where) -> bool | None:
    if key not in fields:
        return None
    node = fields[key][1]
    value = _value(node, where)
    if not isinstance(value, bool):
        raise where(node, f"{key} must be true or false")
    return value


def _notify(fields: dict, where: _Where) -> tuple[str, ...]:
    from scheduler.notify.targets import parse_targets

    if "notify" not in fields:
        return ()
    node = fields["notify"][1]
    value = _value(node, where)
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise where(node, "notify must be a webhook URL or mailto:ADDRESS, or a list of them")
    try:
        parse_targets(items)
    except ValidationError as exc:
        raise where(node, str(exc), exc.hint) from None
    return tuple(items)


def _checked(fields: dict, key: str, where: _Where, parse: Any) -> Any:
    text = _text(fields, key, where)
    if text is None:
        return None
    try:
        return parse(text)
    except ValidationError as exc:
        raise where(fields[key][1], str(exc), exc.hint) from None


def _executor_options(fields: dict, where: _Where) -> dict[str, Any]:
    """``executor_options`` with the ``become`` and ``become_user`` keys moved into it."""
    options = _mapping(fields, "executor_options", where)
    become = _bool(fields, "become", where)
    user = _text(fields, "become_user", where)
    for key, value in (("become", become), ("become_user", user)):
        if value is None:
            continue
        if key in options:
            raise where(fields[key][1], f"{key} is given twice (also in executor_options)")
        options[key] = value
    if become is False and user:
        raise where(fields["become"][1], "become: false with a become_user: drop one")
    return options


def _request(fields: dict, where: _Where) -> TaskRequest:
    retries = None
    if "retries" in fields:
        retries = _value(fields["retries"][1], where)
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
            raise where(fields["retries"][1], "retries must be a whole number from 0 to 100")
    at = None
    if "at" in fields:
        node = fields["at"][1]
        value = _value(node, where)
        if isinstance(value, (datetime, date)):
            value = value.isoformat()
        try:
            at = parse_time(str(value))
        except ValidationError as exc:
            raise where(node, str(exc), exc.hint) from None
    timeout = _checked(fields, "timeout", where, lambda t: parse_duration(t, "timeout"))
    backoff = None
    if "backoff" in fields:
        text = _text(fields, "backoff", where)
        backoff = 0.0 if text in ("0", "0s") else _checked(
            fields, "backoff", where, lambda t: parse_duration(t, "backoff")).total_seconds()
    priority = _text(fields, "priority", where) or "normal"
    if priority not in ("urgent", "normal", "bulk"):
        raise where(fields["priority"][1], f"priority {priority!r} is not urgent, normal or bulk")
    return TaskRequest(
        action=_text(fields, "action", where) or "",
        target=_text(fields, "target", where) or "",
        params=_mapping(fields, "params", where),
        name=_text(fields, "name", where),
        at=at,
        delay=_checked(fields, "in", where, lambda t: parse_duration(t, "in")),
        in_window=bool(_bool(fields, "in_window", where)),
        ignore_windows=bool(_bool(fields, "ignore_windows", where)),
        break_glass=_reason(fields, where),
        max_concurrency=_checked(fields, "max_concurrency", where,
                                 lambda t: parse_limit(t, "max_concurrency")),
        max_failures=_checked(fields, "max_failures", where,
                              lambda t: parse_limit(t, "max_failures")),
        count_failures=_text(fields, "count_failures", where) or "attempts",
        timeout_s=None if timeout is None else timeout.total_seconds(),
        retries=retries,
        backoff_s=backoff,
        priority=priority,
        executor=_text(fields, "executor", where),
        executor_options=_executor_options(fields, where),
        idempotent=_bool(fields, "idempotent", where),
        allow_overlap=_bool(fields, "allow_overlap", where),
        notify=_notify(fields, where),
        waves=_waves(fields, where),
    )


def _reason(fields: dict, where: _Where) -> str | None:
    """``break_glass``: a non-empty reason (it is recorded with the task)."""
    if "break_glass" not in fields:
        return None
    node = fields["break_glass"][1]
    value = _value(node, where)
    if not isinstance(value, str) or not value.strip():
        raise where(node, "break_glass must be the reason, as text",
                    'e.g. break_glass: "INC-4711: DNS down, fix during the freeze"')
    return value


def _waves(fields: dict, where: _Where) -> Any:
    from scheduler.submission.waves import wave_spec

    keys = ("waves", "wave_order", "wave_pause", "wave_gate", "wave_check", "wave_seed")
    values = {k: _text(fields, k, where) for k in keys}
    try:
        return wave_spec(values["waves"], order=values["wave_order"],
                         pause=values["wave_pause"], gate=values["wave_gate"],
                         check=values["wave_check"], seed=values["wave_seed"], flag="")
    except ValidationError as exc:
        node = next((fields[k][1] for k in keys if k in fields and k in str(exc)),
                    fields.get("waves", (None, None))[1])
        if node is None:
            raise
        raise where(node, str(exc), exc.hint) from None
