"""The script registry: every Lua script registered once per Redis client, and its replies read.

1. :func:`script_source`: the text of a script, ``lua/_lib.lua`` (shared helpers) followed by
   ``lua/<verb>.lua``; each verb is one self-contained script on the server.
2. :func:`scripts_for`: one ``redis.commands.core.Script`` per verb, registered the first time
   a client asks and kept while the client lives (registering only hashes the text; redis-py
   loads a script that ``SCRIPT FLUSH`` or a restart dropped at its next call).
3. :func:`raise_if_error`: an error reply is ``{code, message}``: a negative code and a text.
   It is told from a reply of per-job codes (``ack``, ``extend``, ``release``: a list of
   integers, which may well start with a negative one) by its shape, never by its values.

``scheduler.queue.client.Queue`` calls every script through :func:`run_script`; so do the
schedule entry's verbs (``scheduler.queue.schedules``) and the host hashes
(``scheduler.queue.hosts``), which take a client rather than a queue.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import redis

from scheduler.errors import error_for

__all__ = ["LUA_DIR", "VERBS", "is_error_reply", "raise_if_error", "run_script", "script_source",
           "scripts_for"]

LUA_DIR = Path(__file__).with_name("lua")
VERBS = tuple(sorted(p.stem for p in LUA_DIR.glob("*.lua") if not p.stem.startswith("_")))

_registry: weakref.WeakKeyDictionary[redis.Redis, dict[str, Any]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@functools.cache
def script_source(verb: str) -> str:
    """The text registered for a verb: the shared helpers, then the verb's own file."""
    return (LUA_DIR / "_lib.lua").read_text() + "\n" + (LUA_DIR / f"{verb}.lua").read_text()


def scripts_for(client: redis.Redis) -> Mapping[str, Any]:
    """Every verb's script registered on ``client`` (once per client)."""
    scripts = _registry.get(client)
    if scripts is None:
        with _lock:
            scripts = _registry.get(client)
            if scripts is None:
                scripts = {verb: client.register_script(script_source(verb)) for verb in VERBS}
                _registry[client] = scripts
    return scripts


def is_error_reply(reply: Any) -> bool:
    """``{code, message}`` with a negative code and a text message (the shape of ``fs_err``)."""
    return (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], int)
            and reply[0] < 0 and isinstance(reply[1], (bytes, str)))


def raise_if_error(reply: Any) -> Any:
    """The reply, unless it is an error reply: then the typed error for its code."""
    if is_error_reply(reply):
        message = reply[1].decode() if isinstance(reply[1], bytes) else reply[1]
        raise error_for(reply[0], message)
    return reply


def run_script(client: redis.Redis, verb: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    """Call a verb's script; an error reply raises its typed error."""
    return raise_if_error(scripts_for(client)[verb](keys=list(keys), args=list(args)))
