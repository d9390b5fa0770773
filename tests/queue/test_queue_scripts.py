"""The script registry: one registration per client, every script in it, error replies told
from per-job code lists by their shape, and the Lua status codes equal to ``Code``."""

from __future__ import annotations

import re

import pytest

from scheduler.errors import BadArgumentError, Code, StaleTokenError
from scheduler.queue.scripts import (
    LUA_DIR,
    VERBS,
    is_error_reply,
    raise_if_error,
    script_source,
    scripts_for,
)


def test_the_lua_status_codes_are_the_code_enum() -> None:
    lib = (LUA_DIR / "_lib.lua").read_text()
    lua: dict[str, int] = {}
    for names, values in re.findall(r"^local (FS_[A-Z_, ]+?) = ([-\d, ]+)$", lib, re.M):
        for name, value in zip(names.split(","), values.split(","), strict=True):
            lua[name.strip().removeprefix("FS_")] = int(value)
    assert lua == {code.name: int(code) for code in Code}


def test_every_lua_file_is_a_registered_verb_and_every_verb_loads() -> None:
    files = {p.stem for p in LUA_DIR.glob("*.lua") if not p.stem.startswith("_")}
    assert set(VERBS) == files
    assert all(script_source(v).startswith("--[[ _lib.lua") for v in VERBS)


def test_scripts_are_registered_once_per_client(qclient) -> None:
    assert scripts_for(qclient) is scripts_for(qclient)
    assert set(scripts_for(qclient)) == set(VERBS)


@pytest.mark.parametrize("reply", [[-2, 0], [-1, -1], [-5, 0, -2], [0, -2], [3, b"1-0"]])
def test_per_job_code_lists_and_counts_are_never_errors(reply: list) -> None:
    assert not is_error_reply(reply)
    assert raise_if_error(reply) is reply


def test_an_error_reply_raises_its_typed_error() -> None:
    with pytest.raises(StaleTokenError, match="moved"):
        raise_if_error([-1, b"token moved"])
    with pytest.raises(BadArgumentError):
        raise_if_error([-4, "bad"])
