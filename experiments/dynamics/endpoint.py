"""The simulated population behind an OpenAI-compatible endpoint on 127.0.0.1 (aiohttp's server, a core dependency,
in the caller's event loop), so `debate dynamics simulate` drives the engine over real HTTP, as it would a model
server, on any install."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from debate.errors import UsageError
from experiments.dynamics.simulate import SimulatedAgents

__all__ = ["population_endpoint"]


def _app(agents: SimulatedAgents) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": agents.model_name, "object": "model", "created": 0, "owned_by": "sim"}]}
        )

    async def chat(request: web.Request) -> web.Response:
        headers = request.headers
        try:
            verdict = agents.answer(
                headers.get("X-Debate-Purpose", ""), headers.get("X-Debate-Site"), headers.get("X-Debate-Item")
            )
        except UsageError as exc:
            return web.json_response({"error": {"message": str(exc), "type": "invalid_request"}}, status=400)
        content = json.dumps({"opinion": "simulated", "factuality": verdict, "Error severity": 0 if verdict else 3})
        body = await request.json()
        # Tokens as a tokenizer would count them, about 4 characters each: what a price is charged on.
        asked = sum(len(str(m.get("content", ""))) for m in body.get("messages", []) if isinstance(m, dict))
        return web.json_response(
            {
                "id": "sim",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": agents.model_name,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": asked // 4,
                    "completion_tokens": len(content) // 4,
                    "total_tokens": asked // 4 + len(content) // 4,
                },
            }
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@asynccontextmanager
async def population_endpoint(agents: SimulatedAgents) -> AsyncIterator[str]:
    """Serve the population on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    runner = web.AppRunner(_app(agents), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/v1"
    finally:
        await runner.cleanup()
