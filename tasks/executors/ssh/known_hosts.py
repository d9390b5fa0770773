"""Strict host-key checking against an OpenSSH ``known_hosts`` file, read by us.

paramiko's own loader trips over lines it does not understand (``@cert-authority``,
``@revoked``) and knows no wildcards, so this module parses the file itself:

1. plain, comma-separated and hashed (``|1|salt|hash``) host fields, ``[host]:port`` for a
   port other than 22, ``*``/``?`` wildcards and ``!negation`` as OpenSSH matches them;
2. ``@cert-authority`` lines are skipped (host certificates are not used), ``@revoked`` keys
   are refused, malformed lines are ignored like OpenSSH ignores them;
3. :meth:`KnownHosts.verify` says whether a presented key is known, unknown or changed. It
   never writes the file: keys are added by an operator after checking the fingerprint.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

# known_hosts key types -> the host-key algorithms paramiko negotiates for them.
NEGOTIATED = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256")}


class Verdict(Enum):
    KNOWN = "known"
    UNKNOWN = "unknown"  # no entry for the host at all (or none of that key type)
    CHANGED = "changed"  # entries exist for the host, and the presented key is not among them
    REVOKED = "revoked"  # the presented key is listed as @revoked


@dataclass(frozen=True)
class Entry:
    hosts: tuple[str, ...]  # patterns or one hashed name
    keytype: str
    blob: str  # base64 of the public key
    lineno: int
    revoked: bool = False

    def matches(self, name: str) -> bool:
        name = name.lower()
        matched = False
        for pattern in self.hosts:
            negated = pattern.startswith("!")
            if negated:
                pattern = pattern[1:]
            if _pattern_matches(pattern, name):
                if negated:
                    return False
                matched = True
        return matched


def host_key_name(address: str, port: int) -> str:
    """How OpenSSH writes a host in known_hosts: ``addr`` on port 22, else ``[addr]:port``."""
    return address if port == 22 else f"[{address}]:{port}"


def fingerprint(key_bytes: bytes) -> str:
    """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
    digest = base64.b64encode(hashlib.sha256(key_bytes).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def _pattern_matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        try:
            _, _, salt, digest = pattern.split("|")
            mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            return hmac.compare_digest(base64.b64encode(mac).decode(), digest)
        except (ValueError, TypeError):
            return False
    if "*" not in pattern and "?" not in pattern:
        return pattern.lower() == name
    regex = re.escape(pattern.lower()).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(regex, name) is not None


class KnownHosts:
    """The entries of one known_hosts file, as read at construction."""

    def __init__(self, path: Path, entries: list[Entry], exists: bool = True) -> None:
        self.path = path
        self.entries = entries
        self.exists = exists

    @classmethod
    def load(cls, path: Path) -> "KnownHosts":
        """Read ``path``; a missing file is an empty one (every host is then unknown)."""
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return cls(path, [], exists=False)
        return cls(path, list(parse(text)))

    def entries_for(self, names: list[str]) -> list[Entry]:
        return [e for e in self.entries if not e.revoked and any(e.matches(n) for n in names)]

    def negotiable_types(self, names: list[str], supported: tuple[str, ...]) -> tuple[str, ...]:
        """The host-key algorithms worth negotiating: those of keys we know for the host."""
        known: set[str] = set()
        for entry in self.entries_for(names):
            known.update(NEGOTIATED.get(entry.keytype, (entry.keytype,)))
        return tuple(t for t in supported if t in known)

    def verify(self, names: list[str], keytype: str, blob: str) -> tuple[Verdict, Entry | None]:
        """Is the presented key (``keytype``, base64 ``blob``) the one recorded for ``names``?"""
        for entry in self.entries:
            if entry.revoked and entry.blob == blob:
                return Verdict.REVOKED, entry
        entries = self.entries_for(names)
        for entry in entries:
            if entry.keytype == keytype and entry.blob == blob:
                return Verdict.KNOWN, entry
        if entries:
            return Verdict.CHANGED, entries[0]
        return Verdict.UNKNOWN, None


def parse(text: str):
    """Yield the usable entries of a known_hosts text (see the module docstring)."""
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        revoked = False
        if fields[0].startswith("@"):
            if fields[0] != "@revoked":
                continue  # @cert-authority (or an unknown marker): not a host key
            revoked = True
            fields = fields[1:]
        if len(fields) < 3:
            continue
        hosts, keytype, blob = fields[0], fields[1], fields[2]
        try:
            base64.b64decode(blob, validate=True)
        except ValueError:
            continue
        yield Entry(tuple(h for h in hosts.split(",") if h), keytype, blob, lineno, revoked)


__all__ = ["Entry", "KnownHosts", "Verdict", "fingerprint", "host_key_name", "parse"]
