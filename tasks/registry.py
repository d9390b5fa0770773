"""Which actions exist: the built-ins, and plugins from the ``fleetsched.actions`` entry points.

What it owns:

1. the built-in actions (``command``, ``shell``, ``script``, ``copy``, ``firmware``,
   ``key-rollover``, ``ansible``), always present;
2. discovering plugins: every entry point in the group ``fleetsched.actions`` names an action
   class (instantiated without arguments) or instance; its entry point name must equal the
   action's ``name``. A plugin that fails to import, lacks part of the :class:`~tasks.base.Action`
   protocol, or clashes with a built-in or another plugin is left out and reported in
   :attr:`Registry.problems` (shown by ``fleetsched actions list``); it never breaks the others;
3. :func:`get_action` and :func:`list_actions`, from a registry loaded once per process
   (:func:`reload` loads it again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from scheduler.errors import NotFoundError
from tasks.ansible import AnsibleAction
from tasks.base import Action
from tasks.command import CommandAction
from tasks.copy import CopyAction
from tasks.firmware import FirmwareAction
from tasks.key_rollover import KeyRolloverAction
from tasks.params import Param
from tasks.script import ScriptAction
from tasks.shell import ShellAction

__all__ = ["GROUP", "Registry", "describe_action", "get_action", "list_actions", "load",
           "reload"]

GROUP = "fleetsched.actions"
BUILTINS: tuple[type, ...] = (CommandAction, ShellAction, ScriptAction, CopyAction,
                              FirmwareAction, KeyRolloverAction, AnsibleAction)
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_ATTRS: dict[str, type | tuple[type, ...]] = {
    "name": str, "description": str, "idempotent": bool, "requires_window": bool,
    "expected_ms": int, "default_executor": str, "params": dict,
}


@dataclass
class Registry:
    """The actions of this process, where each came from, and plugins that were left out."""

    actions: dict[str, Action] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # name -> "built-in" | "plugin <dist>"
    problems: list[str] = field(default_factory=list)

    def get(self, name: str) -> Action:
        try:
            return self.actions[name]
        except KeyError:
            raise NotFoundError(f"unknown action {name!r}",
                                "known actions: " + ", ".join(sorted(self.actions))) from None


def _protocol_gaps(action: Any) -> list[str]:
    gaps = [f"{attr} ({kind.__name__ if isinstance(kind, type) else kind})"
            for attr, kind in _ATTRS.items()
            if not isinstance(getattr(action, attr, None), kind)]
    gaps += [m for m in ("validate", "run") if not callable(getattr(action, m, None))]
    params = getattr(action, "params", {})
    if isinstance(params, dict) and not all(isinstance(p, Param) for p in params.values()):
        gaps.append("params (a dict of tasks.Param)")
    return gaps


def load() -> Registry:
    """Build a registry now: built-ins, then every entry point of :data:`GROUP`."""
    reg = Registry()
    for cls in BUILTINS:
        action = cls()
        reg.actions[action.name] = action
        reg.origins[action.name] = "built-in"
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        origin = f"plugin {dist.name} {dist.version}" if dist else f"plugin {ep.value}"
        where = f"plugin action {ep.name!r} ({ep.value})"
        if ep.name in reg.actions:
            reg.problems.append(f"{where} ignored: the name is taken by the "
                                f"{reg.origins[ep.name]} action")
            continue
        try:
            obj = ep.load()
            action = obj() if isinstance(obj, type) else obj
        except Exception as exc:  # noqa: BLE001 - one broken plugin must not break the CLI
            reg.problems.append(f"{where} failed to load: {type(exc).__name__}: {exc}")
            continue
        gaps = _protocol_gaps(action)
        if gaps:
            reg.problems.append(f"{where} ignored: missing or wrong {', '.join(gaps)}")
            continue
        if action.name != ep.name or not _NAME.fullmatch(action.name):
            reg.problems.append(f"{where} ignored: its name {action.name!r} must equal the entry "
                                "point name and look like my-action")
            continue
        reg.actions[action.name] = action
        reg.origins[action.name] = origin
    return reg


_registry: Registry | None = None


def registry() -> Registry:
    """This process's registry, loaded on first use."""
    global _registry
    if _registry is None:
        _registry = load()
    return _registry


def reload() -> Registry:
    """Discover the actions again (after installing a plugin into a running process)."""
    global _registry
    _registry = load()
    return _registry


def get_action(name: str) -> Action:
    """The action called ``name``; :class:`NotFoundError` listing the known ones otherwise."""
    return registry().get(name)


def list_actions() -> list[Action]:
    """Every action, sorted by name."""
    return [a for _, a in sorted(registry().actions.items())]


def describe_action(action: Action) -> dict[str, Any]:
    """The action's declaration as plain data (for ``fleetsched actions list/show``)."""
    return {
        "name": action.name,
        "description": action.description,
        "origin": registry().origins.get(action.name, "unregistered"),
        "idempotent": action.idempotent,
        "requires_window": action.requires_window,
        "expected_ms": action.expected_ms,
        "default_executor": action.default_executor,
        "params": [p.describe() for p in action.params.values()],
    }
