"""Control characters made visible: the one rule for showing text that came from a host or an
operator (a job's output, an error, a host name or variable, a task parameter) on a terminal, in
a table or plain listing, or in the HTML report.

Such text may carry terminal control sequences: ``ESC [31m`` colours the operator's terminal,
``ESC ] 0;title BEL`` sets its title, ``ESC [2J`` clears the screen, a carriage return rewrites
the line, a bidi override reorders what is read. :func:`visible` shows each control character
the way ``cat -v`` does, so what the operator reads is what the host sent, and nothing acts on
the terminal:

1. C0 controls as ``^@`` .. ``^_`` (ESC ``^[``, CR ``^M``, BEL ``^G``), DEL as ``^?``;
2. C1 controls U+0080-U+009F as ``M-^@`` .. ``M-^_`` (CSI U+009B is ``M-^[``);
3. the bidi embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069), the
   direction marks (U+200E, U+200F, U+061C), the line and paragraph separators (U+2028,
   U+2029: a terminal may break the line there) and the byte-order mark (U+FEFF) as
   ``<U+202E>``;
4. newline and tab are kept, so multi-line output stays multi-line.

This is for display only: JSON and CSV output and the SQL record keep the text as it was sent.
"""

from __future__ import annotations

_NEWLINE_AND_TAB = (0x09, 0x0A)

SHOWN: dict[int, str] = {
    **{c: f"^{chr(c + 0x40)}" for c in range(0x20) if c not in _NEWLINE_AND_TAB},
    0x7F: "^?",
    **{c: f"M-^{chr(c - 0x80 + 0x40)}" for c in range(0x80, 0xA0)},
    **{c: f"<U+{c:04X}>" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A),
                                    0x200E, 0x200F, 0x061C, 0x2028, 0x2029, 0xFEFF)},
}


def visible(text: str) -> str:
    """``text`` with every control character shown as printable characters (see the module
    docstring); newline and tab unchanged."""
    if text.isprintable():  # every character SHOWN maps is non-printable: the common case
        return text
    return text.translate(SHOWN)


__all__ = ["SHOWN", "visible"]
