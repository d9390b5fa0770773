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
    # customer_output: true            # customers read their own hosts' output
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
from scheduler.submission.request import KEYS, WAVE_KEYS, task_request
from scheduler.submission.submit import TaskRequest

__all__ = ["KEYS", "MAX_BYTES", "compose_yaml", "load_task_file", "parse_task_text"]

MAX_BYTES = 1 << 20  # a task file is small; anything bigger is a mistake
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


def compose_yaml(text: str, source: str) -> Any:
    """The YAML node tree of ``text`` (None for an empty file); bad YAML is one line, ``source:LINE:
    not valid YAML (...)``. Task files and template files are read by it."""
    try:
        return yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ValidationError(f"{source}{line}: not valid YAML ({exc.problem or exc})") from None
    except yaml.YAMLError as exc:
        raise ValidationError(f"{source}: not valid YAML ({exc})") from None


def parse_task_text(text: str, source: str = "<task file>") -> TaskRequest:
    """A :class:`TaskRequest` from the YAML text of a task file."""
    where = _Where(source)
    node = compose_yaml(text, source)
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
    """The file's values, type-checked here, mapped as every front end's by ``task_request``."""
    retries = None
    if "retries" in fields:
        retries = _value(fields["retries"][1], where)
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
            raise where(fields["retries"][1], "retries must be a whole number from 0 to 100")
    at = None
    if "at" in fields:
        value = _value(fields["at"][1], where)
        at = str(value.isoformat() if isinstance(value, (datetime, date)) else value)
    priority = _text(fields, "priority", where) or "normal"
    if priority not in ("urgent", "normal", "bulk"):
        raise where(fields["priority"][1], f"priority {priority!r} is not urgent, normal or bulk")
    texts = ("action", "target", "name", "in", "max_concurrency", "max_failures",
             "count_failures", "timeout", "backoff", "executor") + WAVE_KEYS
    given: dict[str, Any] = {key: _text(fields, key, where) for key in texts}
    given.update(
        retries=retries, at=at, priority=priority, params=_mapping(fields, "params", where),
        in_window=_bool(fields, "in_window", where),
        ignore_windows=_bool(fields, "ignore_windows", where),
        break_glass=_reason(fields, where),
        customer_output=_bool(fields, "customer_output", where),
        executor_options=_executor_options(fields, where),
        idempotent=_bool(fields, "idempotent", where),
        allow_overlap=_bool(fields, "allow_overlap", where),
        notify=_notify(fields, where))

    def locate(key: str, exc: ValidationError) -> ValidationError:
        node = fields[key][1] if key in fields else None
        if key == "waves":  # the wave key the message names, else waves itself
            node = next((fields[k][1] for k in WAVE_KEYS if k in fields and k in str(exc)), node)
        return exc if node is None else where(node, str(exc), exc.hint)

    return task_request(given, flag="", locate=locate)


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
