"""The audit desk: an HTTP API, a persistent audit store and a web UI with human review, over the same Verifier.

    debate serve                      # 127.0.0.1:8000, SQLite in the user data directory, one in-process worker
    debate worker --db URL            # more workers on a shared (PostgreSQL) store

Modules: `app` (create_app), `store` (Store), `worker` (Worker), `settings` (DeskSettings).
The package imports nothing itself, so Alembic and the CLI load only what they use.
"""

__all__: list[str] = []
