"""Redaction, the one home of masking: no secret reaches a log line, an error or a table.

What it owns:

1. credentials in URLs and in drivers' error text (:func:`redact_url`, :func:`redact_text`,
   :func:`redact_exception`): the password of ``redis://:secret@host``, secret query parameters,
   libpq ``password=`` pairs, the settings' own passwords wherever they are quoted;
2. the rest of a URL-like value whose path or query may be its secret, a webhook's
   (:func:`mask_url_rest`, :func:`mask_urls_rest`);
3. a job's resolved secret values (:class:`Redactor`, filled by ``tasks.secrets.resolve``), in
   whatever a host sent back; a worker child's own (:class:`LockedRedactor`, shared by its job
   threads) learns every job's (:class:`SharedRedactor`);
4. the logging filters that apply 1 or 3 to every record and its traceback
   (:class:`UrlRedactingFilter`, :class:`RedactingFilter`), attached to handlers.

Whatever is masked shows as :data:`MASK`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

__all__ = ["MASK", "LockedRedactor", "RedactingFilter", "Redactor", "SharedRedactor",
           "UrlRedactingFilter", "mask_url_rest", "mask_urls_rest", "redact_exception",
           "redact_text", "redact_url"]

MASK = "***"
# Fragments of a secret shorter than this, at the cut of a captured head or tail, are left
# alone (masking every single matching character would destroy the output and hide nothing).
MIN_FRAGMENT = 3

# ------------------------------------------------------------------ credentials in URLs and text

# What may be shown of a URL-like value whose path or query may be its secret (a webhook's):
# the scheme and host (or what comes before the first / ? #), then "/...".
_URL_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URL_REST_IN_TEXT_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/?#\s'\"<>]*)[/?#][^\s'\"<>]*")
# Query parameters that carry a secret (redis-py ``?password=``, libpq ``?password=`` ...).
_SECRET_PARAMS = ("password", "passwd", "pwd", "sslpassword", "secret", "token", "access_token")
_URL_NETLOC_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<netloc>[^/?#\s'\"<>]*)")
_SECRET_PARAM_RE = re.compile(
    r"(?P<key>[?&;](?:" + "|".join(_SECRET_PARAMS) + r")=)[^&#\s'\"]*", re.IGNORECASE)
# libpq keyword/value strings: password=secret or password='sec ret'
_KV_PASSWORD_RE = re.compile(r"\b(?P<key>password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s'\"]+)",
                             re.IGNORECASE)


def _mask_netloc(match: re.Match[str]) -> str:
    netloc = match.group("netloc")
    userinfo, at, host = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return match.group(0)
    user = userinfo.split(":", 1)[0]
    return f"{match.group('scheme')}{user}:{MASK}@{host}"


def mask_url_rest(value: str) -> str:
    """``htps://hooks.example/T0/B0/secret?token=x`` -> ``htps://hooks.example/...``: a
    URL-like value (any scheme, or none) without its path, query and fragment, which may hold
    its secret (a webhook's). ``mailto:ADDRESS`` and a bare host are returned unchanged."""
    if not isinstance(value, str):
        return "<not a url>"
    if value[:7].lower() == "mailto:":
        return value
    scheme = _URL_SCHEME_RE.match(value)
    start = scheme.end() if scheme else 0
    cut = min((i for i in (value.find(c, start) for c in "/?#") if i >= 0), default=-1)
    if cut < 0 or value[cut:] == "/":
        return value
    return value[:cut] + "/..."


def mask_urls_rest(text: str) -> str:
    """Every ``scheme://host/rest`` in free text shown as ``scheme://host/...``."""
    return _URL_REST_IN_TEXT_RE.sub(r"\1/...", text)


def redact_url(url: str) -> str:
    """``redis://:secret@host:6379/0`` -> ``redis://:***@host:6379/0``.

    Also masks secret query parameters (``unix:///run/redis.sock?password=secret``). The host,
    port (even an invalid one) and IPv6 brackets are kept as written; URLs without a secret are
    returned unchanged.
    """
    if not isinstance(url, str):
        return "<not a url>"
    out = _URL_NETLOC_RE.sub(_mask_netloc, url, count=1)
    return _SECRET_PARAM_RE.sub(lambda m: m.group("key") + MASK, out)


def _password_of(url: str) -> str | None:
    try:
        password = urlsplit(url).password
    except ValueError:
        match = _URL_NETLOC_RE.search(url)
        userinfo = match.group("netloc").rpartition("@")[0] if match else ""
        password = userinfo.split(":", 1)[1] if ":" in userinfo else None
    return password or None


def redact_text(text: str, *urls: str | None, one_line: bool = True) -> str:
    """Mask every credential in free text: URLs with a password, secret query parameters,
    libpq ``password=...`` pairs, and the passwords of ``urls`` wherever they appear verbatim
    (an error message may quote a password on its own). With ``one_line`` newlines are folded
    into ``; `` so the result fits the one-line error rule."""
    out = _URL_NETLOC_RE.sub(_mask_netloc, str(text))
    out = _SECRET_PARAM_RE.sub(lambda m: m.group("key") + MASK, out)
    out = _KV_PASSWORD_RE.sub(lambda m: m.group("key") + MASK, out)
    for url in urls:
        password = _password_of(url) if url else None
        if password and len(password) >= 3:
            for form in {password, unquote(password)}:
                out = out.replace(form, MASK)
    if not one_line:
        return out
    return "; ".join(line.strip() for line in out.splitlines() if line.strip())


def redact_exception(exc: BaseException, *urls: str | None) -> str:
    """One printable line for an exception from redis-py, SQLAlchemy or a driver, with every
    credential masked (SQLAlchemy's ArgumentError, for one, quotes the whole URL)."""
    message = redact_text(str(exc), *urls) or type(exc).__name__
    return message


# ------------------------------------------------------------------- a job's secret values

class Redactor:
    """The secret values resolved for one job, and the masking of them in any text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        for v in values:
            self.add(v)

    def add(self, value: str) -> None:
        """Remember a secret value, each line of a multi-line one (like a PEM key), and the
        forms it takes when quoted for a shell (``shlex``), embedded in JSON or ``repr``-ed."""
        if not value:
            return
        forms = {value} | {ln.strip() for ln in value.splitlines() if len(ln.strip()) >= MIN_FRAGMENT}
        for form in list(forms):
            escaped = json.dumps(form, ensure_ascii=False)[1:-1]
            forms |= {escaped, form.replace("'", "'\"'\"'"), escaped.replace("'", "'\"'\"'"),
                      repr(form)[1:-1]}  # as a log line's %r of a list shows it
        self._values |= forms

    def __bool__(self) -> bool:
        return bool(self._values)

    def redact(self, text: str, *, head: bool = False, tail: bool = False) -> str:
        """``text`` with every secret value masked. ``head``: the text is the start of a longer
        output, so a secret's beginning at its end is masked too; ``tail`` likewise for a
        secret's end at its start."""
        if not text or not self._values:
            return text
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, MASK)
        if head:
            text = self._mask_cut_end(text)
        if tail:
            text = self._mask_cut_start(text)
        return text

    def safe_cut(self, text: str) -> int:
        """How much of ``text``, the start of an output still being printed, can be masked
        (:meth:`redact`) and shown now: all but the shortest end that may hold a secret value's
        unfinished start (the longest end that begins one), moved back to the start of any
        whole value that the cut would split. A value is then always masked in one piece, however
        slowly or in however many pieces it is printed (``workers.liveout``)."""
        if not text or not self._values:
            return len(text)
        cut = len(text)
        for value in self._values:  # the earliest start of a value that the text ends within
            first = value[0]
            pos = text.find(first, max(0, len(text) - len(value) + 1))
            while 0 <= pos < cut:
                if value.startswith(text[pos:]):
                    cut = pos
                    break
                pos = text.find(first, pos + 1)
        moved = True
        while moved:  # a whole value across the cut goes out with what follows it
            moved = False
            for value in self._values:
                pos = text.find(value, max(0, cut - len(value) + 1))
                if 0 <= pos < cut < pos + len(value):
                    cut, moved = pos, True
        return cut

    def _mask_cut_end(self, text: str) -> str:
        for value in self._values:
            for n in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
                if text.endswith(value[:n]):
                    return text[:-n] + MASK
        return text

    def _mask_cut_start(self, text: str) -> str:
        for value in self._values:
            for n in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
                if text.startswith(value[-n:]):
                    return MASK + text[n:]
        return text

    def result(self, result: Any) -> Any:
        """A copy of a ``CommandResult`` with its command and captured output masked."""
        if not self._values:
            return result
        return dataclasses.replace(
            result,
            command=self.redact(result.command),
            stdout_head=self.redact(result.stdout_head, head=True),
            stdout_tail=self.redact(result.stdout_tail, tail=True),
            stderr_head=self.redact(result.stderr_head, head=True),
            stderr_tail=self.redact(result.stderr_tail, tail=True),
        )

    def action_result(self, result: Any) -> Any:
        """A copy of an ``ActionResult`` with its command results, steps, error and warnings
        masked (a step keeps the same masked result as ``results``)."""
        if not self._values:
            return result
        results = {id(r): self.result(r) for r in result.results}
        steps = tuple(dataclasses.replace(
            st, command=self.redact(st.command),
            result=None if st.result is None
            else results.get(id(st.result)) or self.result(st.result),
            error=None if st.error is None else self.redact(st.error),
            note=None if st.note is None else self.redact(st.note),
        ) for st in getattr(result, "steps", ()))
        changes = {"steps": steps} if steps else {}
        return dataclasses.replace(
            result,
            results=[results[id(r)] for r in result.results],
            error=None if result.error is None else self.redact(result.error),
            warnings=tuple(self.redact(w) for w in getattr(result, "warnings", ())),
            **changes,
        )


class LockedRedactor(Redactor):
    """The child-wide redactor: job threads add to it while the log filter reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        super().__init__()

    def add(self, value: str) -> None:
        with self._lock:
            super().add(value)

    def redact(self, text: str, *, head: bool = False, tail: bool = False) -> str:
        with self._lock:
            return super().redact(text, head=head, tail=tail)

    def safe_cut(self, text: str) -> int:
        with self._lock:
            return super().safe_cut(text)


class SharedRedactor(Redactor):
    """A job's redactor that also teaches the child-wide one (which masks the child's logs)."""

    def __init__(self, node: LockedRedactor) -> None:
        super().__init__()
        self._node = node

    def add(self, value: str) -> None:
        super().add(value)
        self._node.add(value)


# ---------------------------------------------------------------------------- logging filters

class _MaskingFilter(logging.Filter):
    """Masks a record's message and its traceback with :meth:`mask`, before any formatter."""

    def active(self) -> bool:
        return True

    def mask(self, text: str) -> str:
        raise NotImplementedError

    def filter(self, record: logging.LogRecord) -> bool:
        if self.active():
            record.msg = self.mask(record.getMessage())
            record.args = None
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self.mask(record.exc_text)
        return True


class _Urls(Protocol):
    """What the URL filter reads of ``scheduler.config.Settings`` (which imports this module)."""

    @property
    def redis_url(self) -> str | None: ...

    @property
    def database_url(self) -> str | None: ...


class UrlRedactingFilter(_MaskingFilter):
    """A logging filter masking credentials (see :func:`redact_text`) in every record and its
    traceback, including the passwords of the settings' URLs. Attach it to handlers (a logger's
    filter does not see its children's records)."""

    def __init__(self, settings: _Urls | None = None) -> None:
        super().__init__()
        self.urls = (settings.redis_url, settings.database_url) if settings else ()

    def mask(self, text: str) -> str:
        return redact_text(text, *self.urls, one_line=False)


class RedactingFilter(_MaskingFilter):
    """A logging filter that masks a :class:`Redactor`'s values in every record it passes.

    Attach it to the worker's handlers (not loggers: a logger's filter does not see records of
    its children), so whatever any library logs is masked before it is written."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def active(self) -> bool:
        return bool(self.redactor)

    def mask(self, text: str) -> str:
        return self.redactor.redact(text)
