"""Finding the ``fleetsched ...`` examples the operator is shown, and splitting them into runs.

- :func:`help_examples`: the indented command lines of every command's ``--help`` epilog
  (walking the command tree typer builds, so a new command's examples are found too);
- :func:`doc_examples`: the command lines inside fenced code blocks of README.md and
  docs/**/*.md, except docs/cli.md, which is generated from the help texts (the same examples);
- :func:`segments`: one shell line as the ``fleetsched`` invocations it makes: ``A && B`` is two,
  ``VAR=x fleetsched ...`` sets an environment variable, ``id=$(fleetsched ...)`` captures stdout
  into ``$id``, ``> file`` and ``| jq`` are dropped, other programs (``ansible-inventory``,
  ``echo``) are not run (the test provides what they would have made).

A continued line (ending in ``\\``) is joined to the next; a shell comment is dropped.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"docs/cli.md"}  # from the help texts: its examples are the help examples
_COMMAND = re.compile(r"^(\$ )?([A-Za-z_]+=\S+ )*(\S*/)?fleetsched( |$)|^[a-z_]+=\$\(fleetsched "
                      r"|^ansible-inventory .*&& fleetsched ")
_SEPARATORS = {"&&", "||", ";", "|"}


@dataclass(frozen=True)
class Example:
    source: str  # "README.md:39" or "--help of tasks watch"
    text: str  # the line as shown, continuation lines joined


@dataclass
class Run:
    """One fleetsched invocation of an example."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    capture: str | None = None  # the shell variable its stdout is assigned to


def _joined(lines: list[str]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if pending is not None:
            line = pending[1] + " " + line
            number = pending[0]
            pending = None
        if line.endswith("\\"):
            pending = (number, line[:-1].rstrip())
            continue
        out.append((number, line))
    return out


def _is_command(line: str) -> bool:
    return bool(_COMMAND.match(line))


def help_examples() -> list[Example]:
    from tests.cli_support import root_command

    found: list[Example] = []

    def walk(cmd: object, path: list[str]) -> None:
        epilog = getattr(cmd, "epilog", None) or ""
        indented = [line for line in epilog.splitlines() if line.startswith("  ") or not line]
        for _, line in _joined(indented):
            if _is_command(line):
                found.append(Example(f"--help of {' '.join(path) or 'fleetsched'}", line))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(root_command(), [])
    return found


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [f for f in files if str(f.relative_to(ROOT)) not in GENERATED]


def doc_examples() -> list[Example]:
    found: list[Example] = []
    for path in doc_files():
        lines = path.read_text().splitlines()
        inside, block = False, []
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("```"):
                if inside:
                    for offset, text in _joined([t for _, t in block]):
                        if _is_command(text):
                            found.append(Example(f"{path.relative_to(ROOT)}:"
                                                 f"{block[offset - 1][0]}", text))
                inside, block = not inside, []
                continue
            if inside:
                block.append((number, line))
    return found


def all_examples() -> list[Example]:
    return help_examples() + doc_examples()


def segments(text: str) -> list[Run]:
    """The fleetsched invocations of one example line, in order."""
    line = text.removeprefix("$ ")
    words = shlex.split(line, comments=True)
    runs: list[Run] = []
    current: list[str] = []
    for word in [*words, "&&"]:
        if word not in _SEPARATORS:
            current.append(word)
            continue
        run = _run_of(current)
        if run is not None:
            runs.append(run)
        current = []
    return runs


def _run_of(words: list[str]) -> Run | None:
    if ">" in words:  # a redirection: the output goes to a file
        words = words[:words.index(">")]
    capture = None
    if words and (m := re.fullmatch(r"([a-z_]+)=\$\((.*)", words[0])):
        capture = m.group(1)
        words = [m.group(2), *words[1:]]
        words[-1] = words[-1].removesuffix(")")
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or not (words[0] == "fleetsched" or words[0].endswith("/fleetsched")):
        return None
    return Run(words[1:], env, capture)


def command_path(args: list[str]) -> tuple[str, ...]:
    """The command an invocation runs (``("tasks", "watch")``), global options skipped."""
    from scheduler.cli.app import GLOBAL_OPTIONS
    from tests.cli_support import root_command

    cmd = root_command()
    path: list[str] = []
    words = list(args)
    while words:
        word = words.pop(0)
        if word in GLOBAL_OPTIONS:
            words = words[1:]
            continue
        subs = getattr(cmd, "commands", {})
        if word not in subs:
            break
        cmd = subs[word]
        path.append(word)
    return tuple(path)
