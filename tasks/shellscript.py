"""Where a ``{host.*}`` placeholder may stand in a shell script (the ``shell`` action's ``cmd``).

A placeholder is replaced by its value quoted as one shell word (``shlex.quote``, see
:func:`tasks.argv.render_quoted`). That is one word only where the shell reads quotes afresh:
outside quotes. Inside ``"..."`` or ``'...'`` the value's own quotes would end the string,
after a backslash the opening quote is escaped, in a comment a newline in the value ends the
comment, in a here-document ``$(...)`` in the value would run, and inside backquotes (or a
``$(...)``/``${...}`` within double quotes) the quoting rules nest. So :func:`check_script`
refuses, at validation, a placeholder in any of those places, naming it and the place: the
rule is checked once, before anything is queued, and the script then runs as shown.

The scan is deliberately conservative: it may refuse a position a shell would have read
safely (a here-document anywhere before a placeholder refuses it), never the reverse.
"""

from __future__ import annotations

from tasks.argv import PlaceholderError, check_placeholders, host_placeholders

__all__ = ["check_script"]

_BREAKS = " \t\n;&|()<>"  # a `#` after one of these (or at the start) begins a comment
_PLAIN = "plain"


def _places(script: str) -> list[str]:
    """For each character of ``script``, where it stands: ``plain`` or why not."""
    where: list[str] = []
    state = _PLAIN  # plain | single | double | ansi | comment
    taint: str | None = None  # once set, no later position is plain
    backquoted = False
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        here = {"single": "inside single quotes", "double": "inside double quotes",
                "ansi": "inside $'...'", "comment": "inside a comment"}.get(state)
        if here is None:
            here = taint or ("inside backquotes" if backquoted else _PLAIN)
        if state == "single":
            state = _PLAIN if c == "'" else state
        elif state in ("double", "ansi"):
            if c == "\\" and i + 1 < n:
                where += [here, here]
                i += 2
                continue
            if state == "double" and (c == "`" or script.startswith(("$(", "${"), i)):
                taint = "after a substitution inside double quotes"
            if c == ('"' if state == "double" else "'"):
                state = _PLAIN
        elif state == "comment":
            state = _PLAIN if c == "\n" else state
        elif c == "\\":
            where += [here, "after a backslash"]
            i += 2
            continue
        elif c == "'":
            state = "single"
        elif script.startswith("$'", i):
            where += [here, here]
            state = "ansi"
            i += 2
            continue
        elif c == '"':
            state = "double"
        elif c == "`":
            backquoted = not backquoted
        elif c == "#" and (i == 0 or script[i - 1] in _BREAKS):
            state, here = "comment", "inside a comment"
        elif script.startswith("<<", i) and not script.startswith("<<<", i):
            taint = "after a here-document (<<)"
        where.append(here)
        i += 1
    return where


def check_script(script: str) -> None:
    """Raise :class:`PlaceholderError` for an unknown ``{host.*}`` placeholder, or one that
    stands where its quoted value would not be one shell word (see the module docstring)."""
    found = list(host_placeholders(script))
    if not found:
        return
    check_placeholders(script)
    where = _places(script)
    for m in found:
        place = where[m.start()]
        if place != _PLAIN:
            raise PlaceholderError(
                f"{m.group(0)} at character {m.start() + 1} is {place}: write it bare, outside "
                "quotes, comments, backquotes and here-documents (its value is quoted as one "
                "word for you)")
