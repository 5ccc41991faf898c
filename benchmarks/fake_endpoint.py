"""A fast OpenAI-compatible fake endpoint for benchmarks: raw asyncio HTTP/1.1 with keep-alive, a fixed reply
(a well-formed agent opinion) after an optional latency. Run it as its own process so its CPU is not counted:

    python benchmarks/fake_endpoint.py --port 0 --latency-ms 0     # prints "PORT <n>" when ready
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

OPINION = json.dumps({"opinion": "ok", "factuality": True, "Error severity": 0})
COMPLETION = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": OPINION}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
).encode()
MODELS = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model", "created": 0}]}).encode()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency_s: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            body = MODELS if head.startswith(b"GET") else COMPLETION
            if latency_s and not head.startswith(b"GET"):
                await asyncio.sleep(latency_s)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int, latency_s: float) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, latency_s), "127.0.0.1", port, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, args.latency_ms / 1000))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
