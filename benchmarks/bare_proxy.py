"""The guard's stack with nothing of the guard: a pass-through for `POST /v1/chat/completions` served as `debate
guard` serves (uvicorn, httptools' parser under the same limits), forwarding through the guard's own upstream client
(one aiohttp pool) and returning the completion as it came. No verification, no decision, no store.

bench_guard.py runs it as the floor phase: what any proxy on this server stack adds on this host, so the guard's own
figure can be read against it. Not a product: it has no keys, no limits on bodies and no fault handling.

    python benchmarks/bare_proxy.py --upstream http://127.0.0.1:8000/v1 --port 8010
"""

from __future__ import annotations

import argparse
import asyncio
import json

import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from markov_debate.desk.serving import ACCEPT_BACKLOG, guarded_protocol, server_limits
from markov_debate.guard.upstream import Upstream, UpstreamError


def _app(upstream: Upstream) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await upstream.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] != "/v1/chat/completions":  # /healthz and anything else: up
            await Response(b"{}", media_type="application/json")(scope, receive, send)
            return
        request = Request(scope, receive)
        body = json.loads(await request.body())
        body.pop("sources", None)
        try:
            completion = await upstream.complete(body, auth=None, request_id="bare")
            response = Response(json.dumps(completion).encode(), media_type="application/json")
        except UpstreamError as exc:
            response = Response(str(exc).encode(), status_code=exc.status)
        await response(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the upstream's base URL (…/v1)")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    upstream = Upstream(args.upstream, key=None, timeout_s=120.0)
    config = uvicorn.Config(
        _app(upstream),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        http=guarded_protocol(server_limits(max_connections=None, header_timeout_s=10.0), "httptools"),
        timeout_keep_alive=5,
        backlog=ACCEPT_BACKLOG,
    )
    asyncio.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
