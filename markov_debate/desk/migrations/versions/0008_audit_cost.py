"""each finished audit keeps its cost: every model of its team at its own price (the desk's --price-prompt /
--price-completion for its model), as the command line prices a run; audits finished before it keep none and are
priced at the desk's one price, as they were

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_column("cost_usd")
