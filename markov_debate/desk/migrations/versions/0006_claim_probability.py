"""each claim keeps its p_factual (a desk run with --debate.calibration), and the review queue can be read in its order,
least likely factual first, by an index

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("claims") as batch:
        batch.add_column(sa.Column("p_factual", sa.Float(), nullable=True))
    _backfill()
    op.create_index("ix_claims_queue_p", "claims", ["queue", "p_factual", "audit_id", "position"])


def _backfill() -> None:
    """Claims stored before this revision take the p_factual their audit's report gave them (one audit at a time;
    reports without one leave it empty)."""
    import json

    bind = op.get_bind()
    done = bind.execute(sa.text("SELECT id FROM audits WHERE status = 'done' ORDER BY id")).scalars().all()
    update = sa.text("UPDATE claims SET p_factual = :p WHERE audit_id = :audit AND claim_id = :claim")
    for audit_id in done:
        report_json = bind.execute(sa.text("SELECT report_json FROM audits WHERE id = :id"), {"id": audit_id}).scalar()
        claims = json.loads(report_json)["claims"] if report_json else []
        params = [
            {"p": c["p_factual"], "audit": audit_id, "claim": c["claim_id"]}
            for c in claims
            if c.get("p_factual") is not None
        ]
        if params:
            bind.execute(update, params)


def downgrade() -> None:
    op.drop_index("ix_claims_queue_p", table_name="claims")
    with op.batch_alter_table("claims") as batch:
        batch.drop_column("p_factual")
