"""The simulated population behind an OpenAI-compatible endpoint on 127.0.0.1 (uvicorn in the caller's event loop),
so `debate dynamics simulate` drives the engine over real HTTP, as it would a model server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from debate.errors import UsageError
from experiments.dynamics.simulate import SimulatedAgents

__all__ = ["population_endpoint"]


def _app(agents: SimulatedAgents) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "simulated", "object": "model", "created": 0, "owned_by": "sim"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        headers = request.headers
        try:
            verdict = agents.answer(headers.get("x-debate-purpose", ""), headers.get("x-debate-site"),
                                    headers.get("x-debate-item"))  # fmt: skip
        except UsageError as exc:
            return JSONResponse({"error": {"message": str(exc), "type": "invalid_request"}}, status_code=400)
        content = json.dumps({"opinion": "simulated", "factuality": verdict, "Error severity": 0 if verdict else 3})
        return JSONResponse({
            "id": "sim", "object": "chat.completion", "created": int(time.time()), "model": "simulated",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })  # fmt: skip

    return app


@asynccontextmanager
async def population_endpoint(agents: SimulatedAgents) -> AsyncIterator[str]:
    """Serve the population on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(_app(agents), host="127.0.0.1", port=0, log_level="error",
                                           lifespan="off"))  # fmt: skip
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise UsageError("the simulated endpoint did not start")
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        await task
