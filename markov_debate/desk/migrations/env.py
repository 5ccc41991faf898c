"""Alembic environment: the store passes its open connection (Store.migrate); `alembic -x url=...` works too."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from markov_debate.desk.tables import Base

config = context.config
connection = config.attributes.get("connection")
if connection is not None:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("give the store: alembic -x url=sqlite:///PATH upgrade head")
    engine = create_engine(url)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
