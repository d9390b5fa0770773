"""The log lines of the long-running processes (worker nodes, their children, the exporter).

What it owns:

1. The format: ``log_format`` ``text`` (one human line, control characters a host sent shown
   as ``cat -v`` shows them: ``scheduler.visible``) or ``json`` (one JSON object per line:
   ``ts``, ``level``, ``logger``, ``msg``, ``pid``, the bound fields, ``exc``); ``auto`` is JSON
   when stderr is not a terminal (a service manager or a log shipper reads it).
2. The job context: :func:`job_context` binds ``task``, ``job``, ``host``, ``attempt`` to every
   line the current thread emits until the block ends (a ``contextvars`` variable, so the job
   threads of a child never see each other's fields); :func:`configure` binds fields for the
   whole process (``worker``).
3. One handler on stderr for every logger, the root's: paramiko's and SQLAlchemy's records
   propagate to it, so they get the same format and pass the same filters. The caller passes
   the filters (credential and secret masking, ``scheduler.redact.UrlRedactingFilter`` and
   ``scheduler.redact.RedactingFilter``); formatting runs after them, so a masked message is what
   is written, in either format.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from scheduler.config import LOG_FORMATS, Settings
from scheduler.visible import visible

FORMATS = LOG_FORMATS
JOB_FIELDS = ("task", "job", "host", "attempt", "worker")
# Libraries whose records must reach the root handler (a handler of their own would bypass the
# format and the masking filters).
LIBRARY_LOGGERS = ("paramiko", "sqlalchemy", "alembic")

_job: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("fleetsched_job",
                                                                              default=None)


@contextmanager
def job_context(**fields: Any) -> Iterator[None]:
    """Bind ``fields`` (task, job, host, attempt ...) to every line logged in this block."""
    merged = {**(_job.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _job.set(merged)
    try:
        yield
    finally:
        _job.reset(token)


def resolved(log_format: str) -> str:
    """``json`` or ``text``: ``auto`` is JSON unless stderr is a terminal."""
    if log_format == "auto":
        return "text" if sys.stderr.isatty() else "json"
    return log_format


class ContextFilter(logging.Filter):
    """Copies the process-wide and the bound job fields onto each record (``record.fs``)."""

    def __init__(self, static: dict[str, Any]) -> None:
        super().__init__()
        self.static = static

    def filter(self, record: logging.LogRecord) -> bool:
        record.fs = {**self.static, **(_job.get() or {})}
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in a message stay inside the string)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name,
            "msg": record.getMessage(), "pid": record.process,
        }
        out.update(getattr(record, "fs", None) or {})
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``<time> <prefix>LEVEL logger [task=.. job=..]: message``: the bound job fields (not the
    process-wide worker id, which every line would repeat) before the message; control
    characters shown, never sent to the terminal."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__(f"%(asctime)s {prefix}%(levelname)s %(name)s%(fs_text)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in (getattr(record, "fs", None) or {}).items() if k != "worker"}
        record.fs_text = (" [" + " ".join(f"{k}={v}" for k, v in fields.items()) + "]"
                          if fields else "")
        return visible(super().format(record))


def configure(level: str, log_format: str, filters: Iterable[logging.Filter], *,
              static: dict[str, Any] | None = None, prefix: str = "") -> logging.Handler:
    """Make one stderr handler the root's only one, at ``level``, in ``log_format``, behind
    ``filters`` (masking first: the context filter and the formatter only add fields)."""
    handler = logging.StreamHandler()
    for f in filters:
        handler.addFilter(f)
    handler.addFilter(ContextFilter(dict(static or {})))
    handler.setFormatter(JsonFormatter() if resolved(log_format) == "json"
                         else TextFormatter(prefix))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.WARNING))
    for name in LIBRARY_LOGGERS:
        lib = logging.getLogger(name)
        lib.handlers[:] = []
        lib.propagate = True
    return handler


def announce(logger: str, message: str) -> bool:
    """Write ``message`` as one JSON line through the root's handlers, whatever the level, when
    the format is JSON (so a JSON log has no line of another shape); False in text format,
    where the caller prints it as it always did."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h.formatter, JsonFormatter)]
    if not handlers:
        return False
    record = logging.getLogger(logger).makeRecord(logger, logging.INFO, "", 0, message, None, None)
    for h in handlers:
        h.handle(record)
    return True


__all__ = ["announce", "FORMATS", "JOB_FIELDS", "JsonFormatter", "TextFormatter", "configure",
           "job_context", "resolved"]


def configure_logging(settings: Settings, worker: str | None = None) -> None:
    """A fleetsched process's logging (a worker node's master, its recorder process): stderr at
    the configured level and format (text or JSON lines, the worker id on each), every record
    of every library (paramiko, SQLAlchemy included) passing through ``UrlRedactingFilter``: the
    passwords of the Redis and database URLs (and any URL's credentials) are masked before a
    line is written. Filters go on the handler, not loggers (a logger's filter misses its
    children's records)."""
    from scheduler.redact import UrlRedactingFilter

    configure(settings.log_level, settings.log_format, [UrlRedactingFilter(settings)],
              static={"worker": worker} if worker else None)
