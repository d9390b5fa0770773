"""Generate docs/cli.md from the CLI's own help texts (the command tree typer builds).

    .venv/bin/python scripts/gen_cli_docs.py           # rewrite docs/cli.md
    .venv/bin/python scripts/gen_cli_docs.py --check   # exit 1 if docs/cli.md is out of date

The text comes from the command objects (typer's vendored click) (names, help, options, defaults, epilogs), never from a
rendered terminal, so it does not depend on the terminal width or on colours.
tests/test_cli_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET = ROOT / "docs" / "cli.md"

HEADER = """# fleetsched command reference

Generated from the help texts by `scripts/gen_cli_docs.py`; do not edit by hand (a test fails
when this file and `fleetsched --help` disagree). Every command also answers `--help`.

Conventions: data goes to stdout (`--output table|json|csv` where a command prints data),
messages and progress to stderr; `NO_COLOR` turns colours off. Errors are one `error:` line
and a `hint:` line. Exit codes: 0 ok, 1 failure, 2 usage or validation error, 3 partial
failure, 4 not found, 5 cancelled or declined, 130 interrupted. Shell completion:
`fleetsched --install-completion`.
"""


def _click_root() -> Any:
    import typer

    from scheduler.cli.app import app

    return typer.main.get_command(app)


def _text(value: Any) -> str:
    return "" if value is None else " ".join(str(value).split())


def _kind(p: Any) -> str:
    """The value type of a parameter, from its annotation: choices, int, text, path ..."""
    import enum
    import typing
    from pathlib import Path

    ann = p.type_descriptor.annotation
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    while args and typing.get_origin(ann) is not None:  # Optional[X], list[X]
        ann = args[0]
        args = [a for a in typing.get_args(ann) if a is not type(None)]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return " \\| ".join(str(m.value) for m in ann)  # escaped: inside a table cell
    names = {int: "integer", float: "number", str: "text", Path: "path", bool: "flag"}
    kind = names.get(ann, getattr(ann, "__name__", str(ann)))
    return kind + (" (repeatable)" if getattr(p, "multiple", False) else "")


def _param_rows(cmd: Any) -> list[str]:
    rows = []
    for p in cmd.params:
        if p.param_type_name == "argument":
            name = (p.metavar or p.name).upper()
            kind = _kind(p) + (" (one or more)" if p.nargs == -1 else "")
            rows.append(f"| `{name}` | {kind}{'' if p.required else ', optional'} | "
                        f"{_text(getattr(p, 'help', ''))} |")
            continue
        if getattr(p, "hidden", False) or p.name in ("install_completion", "show_completion"):
            continue
        names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
        default = p.default
        shown = "" if default in (None, False, (), []) or callable(default) else \
            f" (default: `{getattr(default, 'value', default)}`)"
        kind = "flag" if p.is_flag else _kind(p)
        rows.append(f"| {names} | {kind} | {_text(p.help)}{shown} |")
    return rows


def _section(path: list[str], cmd: Any, out: list[str]) -> None:
    title = " ".join(path)
    group = hasattr(cmd, "commands")
    out.append(f"\n## `{title}`\n")
    if cmd.help:
        out.append(cmd.help.strip() + "\n")
    if group and not cmd.invoke_without_command:
        subs = sorted(cmd.commands)
        out.append("Commands: " + ", ".join(f"[`{s}`](#{'-'.join([*path, s])})" for s in subs)
                   + "\n")
    rows = _param_rows(cmd)
    if rows:
        out.append("| option | type | meaning |\n| --- | --- | --- |")
        out.extend(rows)
        out.append("")
    if cmd.epilog:
        out.append("```text\n" + cmd.epilog.strip().replace("\\\n", "\\\n") + "\n```\n")
    if group:
        for name in sorted(cmd.commands):
            _section([*path, name], cmd.commands[name], out)


def generate() -> str:
    out = [HEADER]
    _section(["fleetsched"], _click_root(), out)
    return "\n".join(line.rstrip() for line in "\n".join(out).splitlines()).strip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale")
    args = parser.parse_args()
    text = generate()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print("docs/cli.md is out of date: run .venv/bin/python scripts/gen_cli_docs.py",
                  file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
