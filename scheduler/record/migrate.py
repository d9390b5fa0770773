"""Schema migrations: find the Alembic scripts, upgrade, downgrade, report, check.

The scripts live in ``<repo>/migrations`` in a checkout (editable install) and in
``scheduler/_migrations`` inside an installed wheel (pyproject force-includes them). No
alembic.ini is needed: the configuration is built here and the open connection is handed to
``env.py``, so URLs with passwords never pass through configparser or a log.

Policy for commands that need the database (``ensure_schema``): the default SQLite file (no
``database_url`` configured) is upgraded automatically, since it is private to this user; a
configured database (shared, PostgreSQL) is never migrated behind the operator's back: the
command stops with "run fleetsched db upgrade".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

import scheduler
from scheduler.config import Settings
from scheduler.errors import DatabaseUnavailableError, FleetschedError, ValidationError
from scheduler.record.engine import make_engine
from scheduler.redact import redact_url

# Alembic's `context` is a module-level proxy: one command at a time per process. Nodes are
# separate processes and are kept apart by the database lock taken in env.py.
_ALEMBIC = threading.Lock()

HEAD_REVISION = "0013"
"""The newest revision shipped, known without loading Alembic (``ensure_schema``'s fast path:
a schema already current is confirmed with one SELECT, and Alembic, about 80 ms of imports, is
loaded only to migrate or explain). tests/record/test_db_migrations.py checks it against the scripts:
bump it with every new migration."""

FILE_TEMPLATE = "%%(year)d_%%(month).2d_%%(day).2d_%%(hour).2d%%(minute).2d-%%(rev)s_%%(slug)s"


class SchemaOutOfDateError(FleetschedError):
    """The database schema is older (or newer) than this version of fleetsched expects."""

    exit_code = 1


def migrations_dir() -> Path:
    """The Alembic script directory: the wheel's ``scheduler/_migrations``, else the checkout's."""
    package = Path(scheduler.__file__).resolve().parent
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FleetschedError("the database migrations are missing from this installation",
                          hint="reinstall fleetsched (the wheel ships scheduler/_migrations)")


def alembic_config(connection: sa.Connection | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("file_template", FILE_TEMPLATE)
    cfg.set_main_option("timezone", "UTC")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _engine(url: str | Engine) -> tuple[Engine, bool]:
    if isinstance(url, Engine):
        return url, False
    return make_engine(url), True


def _with_connection(url: str | Engine, fn) -> object:  # noqa: ANN001
    engine, owned = _engine(url)
    try:
        with engine.connect() as conn:
            return fn(conn)
    except sa.exc.OperationalError as exc:
        raise DatabaseUnavailableError(
            f"cannot reach the database {redact_url(engine.url.render_as_string(hide_password=False))}: "
            f"{str(exc.orig).strip().splitlines()[0] if exc.orig else exc}",
            hint="check database_url and that the server is running") from None
    finally:
        if owned:
            engine.dispose()


def _check_revision(revision: str) -> None:
    if revision in ("head", "base", "heads") or revision.startswith(("-", "+")):
        return
    from alembic.script import ScriptDirectory

    try:
        ScriptDirectory.from_config(alembic_config()).get_revision(revision)
    except Exception:  # alembic raises several types for unknown or ambiguous revisions
        raise ValidationError(f"unknown migration revision {revision!r}",
                              hint="see fleetsched db history") from None


def upgrade(url: str | Engine, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` (default: the newest). Safe to run concurrently."""
    from alembic import command

    _check_revision(revision)
    with _ALEMBIC:
        _with_connection(url, lambda c: command.upgrade(alembic_config(c), revision))


def downgrade(url: str | Engine, revision: str) -> None:
    """Downgrade the schema to ``revision`` (``base`` drops every table)."""
    from alembic import command

    _check_revision(revision)
    with _ALEMBIC:
        _with_connection(url, lambda c: command.downgrade(alembic_config(c), revision))


def current(url: str | Engine) -> str | None:
    """The revision the database is at; None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    return _with_connection(url, lambda c: MigrationContext.configure(c).get_current_revision())


def _at_head(url: str | Engine) -> bool:
    """True when the database holds exactly ``HEAD_REVISION`` (no Alembic involved)."""
    def read(conn: sa.Connection) -> bool:
        if not sa.inspect(conn).has_table("alembic_version"):
            return False
        stored = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
        return stored == [HEAD_REVISION]

    return bool(_with_connection(url, read))


def head() -> str:
    """The newest revision this version of fleetsched ships."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise FleetschedError(f"the migrations have {len(heads)} heads: {', '.join(heads)}")
    return heads[0]


@dataclass(frozen=True)
class Revision:
    revision: str
    down_revision: str | None
    message: str
    created: str
    is_head: bool
    is_current: bool


def history(url: str | Engine | None = None) -> list[Revision]:
    """Every shipped revision, oldest first; marks the database's current one if ``url``."""
    from alembic.script import ScriptDirectory

    cur = current(url) if url is not None else None
    script = ScriptDirectory.from_config(alembic_config())
    heads = set(script.get_heads())
    out: list[Revision] = []
    for rev in script.walk_revisions():
        created = ""
        doc = rev.module.__doc__ or ""
        for line in doc.splitlines():
            if line.startswith("Create Date:"):
                created = line.split(":", 1)[1].strip()
        down = rev.down_revision if isinstance(rev.down_revision, str) else None
        out.append(Revision(rev.revision, down, (rev.doc or "").strip(), created,
                            rev.revision in heads, rev.revision == cur))
    return list(reversed(out))


def ensure_schema(settings: Settings, engine: Engine | None = None) -> None:
    """Make sure the schema is current before a command uses the database (see module doc)."""
    url = engine if engine is not None else settings.effective_database_url
    if _at_head(url):
        return
    want = head()
    have = current(url)
    if have == want:
        return
    if settings.database_url is None:
        upgrade(url)
        return
    if have is None:
        raise SchemaOutOfDateError("the database has no fleetsched schema yet",
                                   hint="run fleetsched db upgrade")
    known = {r.revision for r in history()}
    if have not in known:
        raise SchemaOutOfDateError(
            f"the database schema ({have}) is newer than this fleetsched ({want})",
            hint="upgrade fleetsched on this node")
    raise SchemaOutOfDateError(f"the database schema is at {have}, this fleetsched needs {want}",
                               hint="run fleetsched db upgrade")


__all__ = [
    "HEAD_REVISION", "SchemaOutOfDateError", "Revision", "migrations_dir", "alembic_config", "upgrade",
    "downgrade", "current", "head", "history", "ensure_schema",
]
