"""Fuzzing the CLI: random arguments and random files fed to every command through ``main()``
must never end in a traceback, only in a documented exit code (0-5) with at most a one-line
``error:`` and a ``hint:``.

Redis is a closed port (every command that needs it fails fast and starts nothing) and the
state directory is the test's own, so no example can reach a real queue or run for long.
``demo`` (which ignores the settings by design) and ``exporter`` (which serves on with Redis
down, by design: tests/monitoring/test_metrics_exporter.py) are left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli_support import all_commands, isolated_env, leaf_commands, root_command, run_cli

DEAD_REDIS = "redis://127.0.0.1:1/0"
LEFT_OUT = ("demo", "exporter")
COMMANDS = [p for p in all_commands() if p and p[0] not in LEFT_OUT]
LEAVES = [p for p in leaf_commands() if p[0] not in LEFT_OUT]
EXIT_CODES = {0, 1, 2, 3, 4, 5}
FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def options_of(path: list[str]) -> list[tuple[str, bool]]:
    """(option, is a flag) for every option of the command at ``path``."""
    cmd = root_command()
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return [(o, bool(getattr(p, "is_flag", False))) for p in cmd.params
            for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]
            if o.startswith("-") and o not in ("--install-completion", "--show-completion")]


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=30)
values = st.one_of(
    texts, st.integers(0, 10**12).map(str), st.floats(allow_nan=True).map(str),
    st.sampled_from(["", "-", "--", "0", "-1", "1e999", "nan", "all", "group:web", "!x", "web-*",
                     "24h", "0s", "2026-13-45", "2026-12-01T22:00+25:00", "json", "csv", "table",
                     "x=y", "=", "@env:NOPE", "@file:/nonexistent", "../../etc/passwd",
                     "succeeded", "urgent", "simulate", "1", "42", "1.5", "%", "150%", "\t",
                     "\u202e", "'", '"', "$(id)", ";rm -rf /"]))


plausible = st.sampled_from(["1", "2", "42", "web-01", "acme-001", "command", "copy", "head",
                             "base", "0001", "24h", "group:web", "all", "urgent", "10", "0.5",
                             "30s", "2026-12-01T22:00", "failed", "alice"])


@st.composite
def argv(draw: st.DrawFn, files: list[Path]) -> list[str]:
    path = draw(st.sampled_from(LEAVES if draw(st.integers(0, 4)) else COMMANDS))
    opts = options_of(path)
    tokens: list[str] = []
    # Positional arguments first, mostly plausible ones, so parsing gets past them.
    for _ in range(draw(st.integers(0, 2)) if path in LEAVES else 0):
        tokens.append(draw(st.one_of(plausible, st.sampled_from(files).map(str), values)))
    for _ in range(draw(st.integers(0, 5))):
        if not opts or draw(st.integers(0, 9)) == 0:
            tokens.append(draw(values))  # now and then a stray token
            continue
        option, flag = draw(st.sampled_from(opts))
        tokens.append(option)
        if not flag:
            choice = st.sampled_from(["table", "json", "csv"]) if option in ("--output", "-o") \
                else st.one_of(plausible, values, st.sampled_from(files).map(str))
            tokens.append(draw(choice))
    return [*path, *tokens]


def write_files(root: Path) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    samples = {
        "inventory.ini": "[web]\nweb-[01:03] ansible_port=99999\n[db:children]\nweb\nnope\n",
        "inventory.yaml": "all:\n  hosts:\n    a: {ansible_host: [1, 2]}\n  children: 7\n",
        "inventory.json": '{"_meta": {"hostvars": {"x": null}}, "all": {"children": ["all"]}}',
        "task.yaml": "action: command\ntarget: all\nparams: {cmd: [1]}\nretries: -3\n",
        "config.toml": 'lease_ms = "soon"\nredis_url = 3\n',
        "empty": "",
        "binary.bin": "\x00\xff\xfe garbage \x1b[31m",
    }
    out = []
    for name, text in samples.items():
        p = root / name
        p.write_text(text, errors="surrogateescape") if "\x00" not in text else p.write_bytes(
            text.encode("latin-1"))
        out.append(p)
    out.append(root / "missing.ini")
    out.append(root)  # a directory where a file is expected
    return out


def check(code: int, out: str, err: str) -> None:
    assert code in EXIT_CODES, (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    if code != 0 and err.startswith("error:"):
        lines = [ln for ln in err.splitlines() if ln.startswith(("error:", "hint:"))]
        assert len(lines) <= 2, err


@FUZZ
@given(data=st.data())
def test_random_arguments_to_any_command_never_end_in_a_traceback(tmp_path: Path, data) -> None:
    files = write_files(tmp_path / "files")
    args = data.draw(argv(files))
    env = isolated_env(tmp_path)
    code, out, err = run_cli(["--redis-url", DEAD_REDIS, "--state-dir", str(tmp_path / "state"),
                              *args], env)
    check(code, out, err)


@FUZZ
@given(content=st.one_of(texts, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))),
       kind=st.sampled_from(["hosts import", "submit -f", "--config"]))
def test_random_files_given_to_the_parsers_never_end_in_a_traceback(tmp_path: Path, content: str,
                                                                     kind: str) -> None:
    path = tmp_path / "input.file"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    base = ["--redis-url", DEAD_REDIS, "--state-dir", str(tmp_path / "state")]
    args = {"hosts import": [*base, "hosts", "import", str(path)],
            "submit -f": [*base, "submit", "-f", str(path), "--dry-run"],
            "--config": ["--config", str(path), *base, "status"]}[kind]
    code, out, err = run_cli(args, isolated_env(tmp_path))
    check(code, out, err)


def test_the_fuzzed_commands_cover_the_whole_cli() -> None:
    assert ["report"] in COMMANDS and ["tasks", "watch"] in COMMANDS and ["top"] in COMMANDS
    assert len(COMMANDS) >= 35


@pytest.mark.parametrize("args", [
    ["top", "--once", "--interval", "nan"],
    ["report", "--since", "1e999h"],
    ["tasks", "watch", "1", "--timeout", "-5s"],
    ["hosts", "history", "\u202e", "--limit", "0"],
])
def test_known_edge_cases_are_plain_errors(tmp_path: Path, args: list[str]) -> None:
    code, out, err = run_cli(["--redis-url", DEAD_REDIS, "--state-dir", str(tmp_path / "s"), *args],
                             isolated_env(tmp_path))
    check(code, out, err)
    assert code != 0
