"""Ansible host patterns: ``name``, ``name:port`` and ranges like ``web[01:50]``, ``db-[a:f]``.

The subset implemented (documented in docs/guides/inventory.md):

- ``[START:END]`` and ``[START:END:STEP]``, inclusive, numeric or single letters;
- numeric ranges keep the width of a zero-padded START (``[01:50]`` gives ``01`` .. ``50``),
  and then START and END must have the same width, as Ansible requires;
- several ranges in one pattern multiply out (``rack[1:2]-node[a:b]`` is four hosts);
- a trailing ``:PORT`` after the name or range applies to every host of the pattern.

A pattern may expand to at most ``MAX_EXPANSION`` names, so a typo like ``[1:99999999]``
is an error rather than a machine out of memory.
"""

from __future__ import annotations

import re
import string

MAX_EXPANSION = 100_000

_RANGE = re.compile(r"^(?:([0-9]+)|([A-Za-z])):(?:([0-9]+)|([A-Za-z]))(?::([0-9]+))?$")


def split_port(pattern: str) -> tuple[str, int | None]:
    """``"web[1:3]:2222"`` -> ``("web[1:3]", 2222)``; a colon inside brackets is a range."""
    depth = 0
    cuts: list[int] = []
    for i, ch in enumerate(pattern):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == ":" and depth == 0:
            cuts.append(i)
    if not cuts:
        return pattern, None
    if len(cuts) > 1:
        raise ValueError(f"host pattern {pattern!r} looks like an IPv6 address; "
                         "name the host and set ansible_host to the address")
    head, tail = pattern[:cuts[0]], pattern[cuts[0] + 1:]
    if not re.fullmatch(r"[0-9]{1,5}", tail) or not 1 <= int(tail) <= 65535:
        raise ValueError(f"host pattern {pattern!r} has an invalid port {tail!r} after ':'")
    return head, int(tail)


def _expand_one(spec: str, pattern: str) -> list[str]:
    m = _RANGE.fullmatch(spec)
    if not m:
        raise ValueError(f"host pattern {pattern!r}: [{spec}] is not a range "
                         "like [01:50], [a:f] or [1:9:2]")
    num_lo, chr_lo, num_hi, chr_hi, step_s = m.groups()
    step = int(step_s) if step_s else 1
    if step < 1:
        raise ValueError(f"host pattern {pattern!r}: range step must be at least 1")
    if num_lo is not None and num_hi is not None:
        lo, hi = int(num_lo), int(num_hi)
        width = 0
        if num_lo.startswith("0") and len(num_lo) > 1:
            if len(num_lo) != len(num_hi):
                raise ValueError(f"host pattern {pattern!r}: zero-padded range [{spec}] needs "
                                 "START and END of the same width")
            width = len(num_lo)
        if lo > hi:
            raise ValueError(f"host pattern {pattern!r}: range [{spec}] ends before it starts")
        if (hi - lo) // step + 1 > MAX_EXPANSION:
            raise ValueError(f"host pattern {pattern!r} expands to more than "
                             f"{MAX_EXPANSION} hosts")
        return [str(n).zfill(width) for n in range(lo, hi + 1, step)]
    if chr_lo is not None and chr_hi is not None:
        letters = string.ascii_letters
        lo, hi = letters.index(chr_lo), letters.index(chr_hi)
        if lo > hi:
            raise ValueError(f"host pattern {pattern!r}: range [{spec}] ends before it starts")
        return [letters[i] for i in range(lo, hi + 1, step)]
    raise ValueError(f"host pattern {pattern!r}: range [{spec}] mixes digits and letters")


def expand(pattern: str) -> tuple[list[str], int | None]:
    """The host names a pattern stands for, and the port it names (or None)."""
    body, port = split_port(pattern.strip())
    parts: list[list[str]] = []
    pos = 0
    for m in re.finditer(r"\[([^\[\]]*)\]", body):
        parts.append([body[pos:m.start()]])
        parts.append(_expand_one(m.group(1), pattern))
        pos = m.end()
    parts.append([body[pos:]])
    if any("[" in p or "]" in p for part in parts[::2] for p in part):
        raise ValueError(f"host pattern {pattern!r} has unbalanced brackets")
    names = [""]
    for options in parts:
        if len(names) * len(options) > MAX_EXPANSION:
            raise ValueError(f"host pattern {pattern!r} expands to more than "
                             f"{MAX_EXPANSION} hosts")
        names = [n + o for n in names for o in options]
    return names, port


__all__ = ["MAX_EXPANSION", "expand", "split_port"]
