"""The guard: an OpenAI-compatible server in front of any upstream endpoint that verifies each answer against the
sources its request carried, before the caller's user reads it.

    debate guard --upstream http://llm:8000/v1 --policy block --debate inline

Modules: `settings` (GuardSettings), `sources` (what a request cites), `decide` (risk and action), `upstream` (the
proxied endpoint), `check` (the verification with its deadline), `record` (every decision in the desk's store),
`app` (create_app), `cli` (the command). Like the desk, the package imports nothing itself.
"""

__all__: list[str] = []
