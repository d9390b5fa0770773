"""Fuzz-ish: random bytes, random lines and mutated sample inventories fed to every parser
give a parsed inventory or one ``InventoryError`` line, never another exception."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.inventory import FORMATS, InventoryError, parse_text, resolve
from scheduler.inventory.ranges import expand
from scheduler.inventory.source import read_text

DATA = Path(__file__).parent / "data" / "inventories"
SAMPLES = {"ini": (DATA / "fleet.ini").read_text(), "yaml": (DATA / "fleet.yml").read_text(),
           "json": (DATA / "fleet.json").read_text()}

# Characters that matter to the three grammars, plus some that must be refused.
SYNTAX = st.sampled_from(list("[]{}:=,#;'\"-!&*|>%@`$\\/ \t\n") + ["---", "!vault", "<<", "~",
                                                                   "${x}", "\x00", "\x7f", "é"])
LINE = st.lists(st.one_of(SYNTAX, st.text(min_size=1, max_size=8)), max_size=12).map("".join)
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def parses_or_refuses(text: str, fmt: str) -> None:
    try:
        resolved = resolve(parse_text(text, "fuzz", fmt))
    except InventoryError as exc:
        message = str(exc)
        assert message.startswith("fuzz") and "\n" not in message, message
        return
    for host in resolved.hosts.values():
        assert host.name and 1 <= host.port <= 65535


@FAST
@given(text=st.text(max_size=400), fmt=st.sampled_from(FORMATS))
def test_random_text_never_raises_anything_but_an_inventory_error(text: str, fmt: str) -> None:
    parses_or_refuses(text, fmt)


@FAST
@given(lines=st.lists(LINE, max_size=20), fmt=st.sampled_from(FORMATS))
def test_random_lines_of_syntax_characters_never_raise_anything_else(
        lines: list[str], fmt: str) -> None:
    parses_or_refuses("\n".join(lines), fmt)


@FAST
@given(fmt=st.sampled_from(FORMATS), data=st.data())
def test_mutated_sample_inventories_never_raise_anything_else(
        fmt: str, data: st.DataObject) -> None:
    text = SAMPLES[fmt]
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 6))
        insert = data.draw(st.one_of(SYNTAX, LINE))
        text = text[:at] + insert + text[at + cut:]
    parses_or_refuses(text, fmt)


@FAST
@given(raw=st.binary(max_size=300))
def test_random_bytes_from_a_file_are_read_or_refused_with_a_line(
        raw: bytes, tmp_path_factory: object) -> None:
    path = Path(tmp_path_factory.mktemp("fuzz")) / "inv"  # type: ignore[attr-defined]
    path.write_bytes(raw)
    try:
        text = read_text(path)
    except InventoryError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
        return
    for fmt in FORMATS:
        try:
            resolve(parse_text(text, str(path), fmt))
        except InventoryError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc)


@FAST
@given(pattern=st.text(alphabet="ab01[]:-.9", max_size=24))
def test_host_patterns_expand_or_raise_value_error(pattern: str) -> None:
    try:
        names, port = expand(pattern)
    except ValueError:
        return
    assert names and (port is None or 1 <= port <= 65535)
