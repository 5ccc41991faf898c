"""a batch upload takes an Idempotency-Key (a retried upload returns the first batch, never queues its items twice),
and a key's waiting audits are counted by an index (the per-key quota)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("request_sha256", sa.String(length=64), nullable=True))
        batch.create_unique_constraint("uq_batches_idempotency", ["submitted_by", "idempotency_key"])
    op.create_index("ix_audits_owner_status", "audits", ["submitted_by", "status"])


def downgrade() -> None:
    op.drop_index("ix_audits_owner_status", table_name="audits")
    with op.batch_alter_table("batches") as batch:
        batch.drop_constraint("uq_batches_idempotency", type_="unique")
        batch.drop_column("request_sha256")
        batch.drop_column("idempotency_key")
