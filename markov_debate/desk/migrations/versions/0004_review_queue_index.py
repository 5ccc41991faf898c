"""the review queue as an indexed read: each claim says where it waits (needs-review, spot-check, none once
reviewed) and carries its fixed spot-check draw and what a reviewer reads next to it (evidence, deciding opinion);
a submitter's audits and events by kind by an index (ownership, health)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("claims") as batch:
        batch.add_column(sa.Column("queue", sa.String(length=20), nullable=True))
        batch.add_column(sa.Column("draw", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("context", sa.Text(), nullable=True))
    _backfill()
    op.create_index("ix_claims_queue", "claims", ["queue", "audit_id", "position"])
    # a submitter's own audits, newest first (ownership)
    op.create_index("ix_audits_owner", "audits", ["submitted_by", "id"])
    # the last finished audit and the deferrals since, for health without an in-process worker
    op.create_index("ix_events_kind", "events", ["kind", "id"])


def _backfill() -> None:
    """Claims stored before this revision: unreviewed ones of finished audits join the queue, as a finish would
    have put them there, with their context from the audit's report (read one audit at a time)."""
    import json

    from markov_debate.desk.store.queueing import claim_context, claim_draw, queue_of

    bind = op.get_bind()
    done = bind.execute(sa.text("SELECT id FROM audits WHERE status = 'done' ORDER BY id")).scalars().all()
    reviewed = {(a, c) for a, c in bind.execute(sa.text("SELECT DISTINCT audit_id, claim_id FROM reviews"))}
    update = sa.text(
        "UPDATE claims SET queue = :queue, draw = :draw, context = :context WHERE audit_id = :audit AND claim_id = :claim"
    )
    for audit_id in done:
        report_json = bind.execute(sa.text("SELECT report_json FROM audits WHERE id = :id"), {"id": audit_id}).scalar()
        claims = {c["claim_id"]: c for c in json.loads(report_json)["claims"]} if report_json else {}
        rows = bind.execute(
            sa.text("SELECT claim_id, engine_label FROM claims WHERE audit_id = :id"), {"id": audit_id}
        ).all()
        params = [
            {
                "queue": None if (audit_id, claim_id) in reviewed else queue_of(label),
                "draw": claim_draw(audit_id, claim_id),
                "context": claim_context(claims[claim_id]) if claim_id in claims else None,
                "audit": audit_id,
                "claim": claim_id,
            }
            for claim_id, label in rows
        ]
        if params:
            bind.execute(update, params)


def downgrade() -> None:
    op.drop_index("ix_events_kind", table_name="events")
    op.drop_index("ix_audits_owner", table_name="audits")
    op.drop_index("ix_claims_queue", table_name="claims")
    with op.batch_alter_table("claims") as batch:
        batch.drop_column("context")
        batch.drop_column("draw")
        batch.drop_column("queue")
