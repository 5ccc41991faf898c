"""the audit's verdict as reviewed (lists, filters and counts show what a reviewer's overturn made of it)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 10:00:00
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("reviewed_verdict", sa.String(length=40), nullable=True))
        batch.create_index("ix_audits_reviewed_verdict", ["reviewed_verdict"])
    _backfill()


def _backfill() -> None:
    """Audits reviewed before this revision get their verdict as reviewed, as a new review would set it."""
    from debate.types import Report
    from markov_debate.desk.models import ReviewInfo
    from markov_debate.desk.views import reviewed_verdict

    bind = op.get_bind()
    reviewed = bind.execute(sa.text("SELECT DISTINCT audit_id FROM reviews WHERE decision = 'overturn'")).all()
    for (audit_id,) in reviewed:
        report_json = bind.execute(sa.text("SELECT report_json FROM audits WHERE id = :id"), {"id": audit_id}).scalar()
        if report_json is None:
            continue
        rows = bind.execute(
            sa.text(
                "SELECT id, audit_id, claim_id, reviewer, created_at, decision, label, engine_label, decided_by, note "
                "FROM reviews WHERE audit_id = :id ORDER BY id"
            ),
            {"id": audit_id},
        ).mappings()
        latest = {r["claim_id"]: ReviewInfo.model_validate(dict(r)) for r in rows}
        verdict = reviewed_verdict(Report.model_validate(json.loads(report_json)), latest)
        bind.execute(sa.text("UPDATE audits SET reviewed_verdict = :v WHERE id = :id"), {"v": verdict, "id": audit_id})


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_index("ix_audits_reviewed_verdict")
        batch.drop_column("reviewed_verdict")
