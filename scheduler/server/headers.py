"""The security headers every answer of the API carries (issue 28 section 5), in one place for
the two that send answers: ``scheduler.server.hardening`` (every routed answer) and
``scheduler.server.errors`` (the 500 answered outside every middleware)."""

from __future__ import annotations

__all__ = ["CACHE_CONTROL", "SECURITY_HEADERS", "as_dict"]

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    # A JSON answer loads nothing and is framed by nobody.
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
)
# Answers are about a moment of the fleet and may name hosts: no cache keeps them, unless a
# route chose its own (a stream of events).
CACHE_CONTROL = (b"cache-control", b"no-store")


def as_dict() -> dict[str, str]:
    """Every header above, for a ``Response(headers=...)``."""
    return {name.decode(): value.decode() for name, value in (*SECURITY_HEADERS, CACHE_CONTROL)}
