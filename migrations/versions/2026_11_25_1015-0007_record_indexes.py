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
names and columns) and this revision skips those that exist.
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


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, name, columns in INDEXES:
        if name not in {ix['name'] for ix in inspector.get_indexes(table)}:
            op.create_index(name, table, columns, unique=False)


def downgrade() -> None:
    for table, name, _columns in reversed(INDEXES):
        op.drop_index(name, table_name=table)
