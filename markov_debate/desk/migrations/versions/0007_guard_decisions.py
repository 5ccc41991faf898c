"""the guard's decisions: each answer `debate guard` checked, with its request id, policy and action, beside its audit

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "guard_decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("audit_id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=100), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("caller", sa.String(length=200), nullable=False),
        sa.Column("route", sa.String(length=100), nullable=True),
        sa.Column("policy", sa.String(length=20), nullable=False),
        sa.Column("action", sa.String(length=30), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("risk", sa.String(length=20), nullable=True),
        sa.Column("verification_json", sa.Text(), nullable=False),
        sa.Column("report_json", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["audit_id"], ["audits.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("request_id"),
    )
    op.create_index("ix_guard_decisions_audit_id", "guard_decisions", ["audit_id"])
    op.create_index("ix_guard_decisions_action", "guard_decisions", ["action", "id"])


def downgrade() -> None:
    op.drop_index("ix_guard_decisions_action", table_name="guard_decisions")
    op.drop_index("ix_guard_decisions_audit_id", table_name="guard_decisions")
    op.drop_table("guard_decisions")
