"""indexes for the operator queries at volume: events by job, events by kind and task, jobs by
finish time

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 10:15:00+00:00

With millions of events a day, every query an operator command runs must start from an index
(docs/architecture.md, "System of record", lists which query uses which):

- ``ix_events_job_id_ts`` (job_id, ts): ``jobs show``, ``tasks output`` and a job's trail
  read one job's events; without it each read every event.
- ``ix_events_kind_task_id_ts`` (kind, task_id, ts): the rare kinds of one task (the control
  trail of ``tasks show``, the report's retried jobs, ``tasks watch``'s failures, reconcile's
  last pause) and the schedule events (``missed``, ``schedule-pause``, task_id NULL) newest
  first; the (task_id, ts) index alone read every event of a 100,000-job task for them.
- ``ix_jobs_finished_at`` (finished_at): ``report --since`` selects jobs finished since (or not
  finished) instead of reading every job.

Cost on a large table: Alembic runs each migration in a transaction, where PostgreSQL cannot
``CREATE INDEX CONCURRENTLY``; a plain ``CREATE INDEX`` takes a SHARE lock on the table, so
inserts into ``events`` (the recorder) and updates of ``jobs`` wait until the index is built
(reads go on). Measured on the 2-core development machine: 46 s for all three over 10 million
events and 4.9 million jobs (docs/benchmarks.md, "Events at volume"). The recorder catches up from the Redis stream afterwards; nothing is lost, only delayed. To avoid
even that, create the same indexes by hand beforehand with ``CREATE INDEX CONCURRENTLY`` (same
names and columns) and this revision skips those that exist (and builds again one that a
failed concurrent build left invalid).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | Sequence[str] | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (
    ('events', 'ix_events_job_id_ts', ['job_id', 'ts']),
    ('events', 'ix_events_kind_task_id_ts', ['kind', 'task_id', 'ts']),
    ('jobs', 'ix_jobs_finished_at', ['finished_at']),
)


def _invalid_on_postgresql(bind: sa.Connection, name: str) -> bool:
    """A ``CREATE INDEX CONCURRENTLY`` that failed leaves an invalid index behind: it has the
    name, but no query uses it. Such an index is built again rather than skipped."""
    if bind.dialect.name != 'postgresql':
        return False
    valid = bind.execute(sa.text(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = :name AND pg_catalog.pg_table_is_visible(c.oid)"), {'name': name}).scalar()
    return valid is False


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    for table, name, columns in INDEXES:
        if name in {ix['name'] for ix in inspector.get_indexes(table)}:
            if not _invalid_on_postgresql(bind, name):
                continue
            op.drop_index(name, table_name=table)
        op.create_index(name, table, columns, unique=False)


def downgrade() -> None:
    for table, name, _columns in reversed(INDEXES):
        op.drop_index(name, table_name=table)
