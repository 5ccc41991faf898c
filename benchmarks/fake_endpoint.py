"""A fast OpenAI-compatible fake endpoint for benchmarks: raw asyncio HTTP/1.1 with keep-alive. Run it as its own
process so its CPU is not counted:

    python benchmarks/fake_endpoint.py --latency-ms 100                  # prints "PORT <n>" when ready
    python benchmarks/fake_endpoint.py --fault-rate 0.3 --seed 1 --verdict-rule
    python benchmarks/fake_endpoint.py --answer "Paris is in France [doc1]." --latency-ms 300 --token-ms 20

Replies are a well-formed agent opinion (factual; with --verdict-rule, factual exactly when the first user
message, where the claim is, contains the word "even"). With --fault-rate, that share of chat requests gets one of
nine faults: 429 with Retry-After, 500, 503, a hang past any sane timeout, a dropped connection, prose instead of
JSON, a truncated JSON body, an opinion with the wrong keys, or empty choices. GET /outage/on makes every chat
request a 503 until GET /outage/off (an endpoint outage). GET /stats returns {"requests",
"faults", "first", "last", "cpu_s", "arrivals"}: the wall-clock times of the first chat request's arrival and the
last reply, this process's own CPU seconds (so a benchmark can show the fake is not its bottleneck) and every chat
request's arrival (for rate benchmarks). A request whose body has `"metadata": {"fake_latency_ms": "412"}` is
answered after that time instead of --latency-ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time

MODELS = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model", "created": 0}]}).encode()
FAULTS = ("429", "500", "503", "hang", "drop", "prose", "truncated", "wrong-keys", "empty-choices")


def completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
    ).encode()


def stream(content: str) -> bytes:
    """`content` as an OpenAI stream: a chunk per word, a finish chunk, [DONE]."""
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "fake-model"}
    words = [w + " " for w in content.split(" ")]
    words[-1] = words[-1].rstrip(" ")
    deltas = [{"role": "assistant", "content": ""}, *({"content": w} for w in words)]
    events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def opinion(factual: bool) -> str:
    return json.dumps({"opinion": "checked", "factuality": factual, "Error severity": 0 if factual else 4})


FIXED = completion(opinion(True))


class Endpoint:
    def __init__(
        self,
        *,
        latency_s: float,
        fault_rate: float,
        seed: int,
        verdict_rule: bool,
        hang_s: float,
        answer: str | None = None,
        token_s: float = 0.0,
        latency_spread: float = 0.0,
    ) -> None:
        self.latency_spread = latency_spread
        """Each reply's latency drawn uniformly from latency_s * (1 ± latency_spread)."""
        self.answer = answer
        self.token_s = token_s
        """With an answer: the time between a stream's events (after `latency_s` for the first)."""
        """A fixed answer for every chat request (an upstream behind `debate guard`); streamed when asked."""
        self.latency_s = latency_s
        self.fault_rate = fault_rate
        self.random = random.Random(seed)
        self.verdict_rule = verdict_rule
        self.hang_s = hang_s
        self.requests = 0
        self.faults = 0
        self.first: float | None = None
        self.last: float | None = None
        self.outage = False
        self.arrivals: list[float] = []
        """Each chat request's arrival (wall clock), for rate benchmarks."""
        """While on (GET /outage/on, until GET /outage/off), every chat request gets 503."""

    async def _paced(self, writer: asyncio.StreamWriter, payload: bytes) -> None:
        """A stream as a model sends it: the head at once, then an event every token_s."""
        head = f"HTTP/1.1 200 X\r\ncontent-type: text/event-stream\r\ncontent-length: {len(payload)}\r\n\r\n"
        writer.write(head.encode())
        for event in payload.split(b"\n\n")[:-1]:
            writer.write(event + b"\n\n")
            await writer.drain()
            await asyncio.sleep(self.token_s)
        self.last = time.time()

    def _latency_s(self, body: bytes) -> float:
        """This request's time to answer: the request's own `metadata.fake_latency_ms` when it names one (so a
        benchmark can send the same requests, with the same times, straight and through a proxy, and compare them
        request by request), else --latency-ms with its spread."""
        if b"fake_latency_ms" in body:
            metadata = json.loads(body).get("metadata") or {}
            if "fake_latency_ms" in metadata:
                return float(metadata["fake_latency_ms"]) / 1000
        # --latency-spread: a model's time varies with the answer; a fixed one would keep every client that started
        # together in step, as a burst, for the whole run.
        spread = self.latency_spread * self.latency_s
        return self.latency_s + self.random.uniform(-spread, spread) if self.latency_s else 0.0

    def _reply(self, body: bytes) -> bytes:
        if self.answer is not None:
            return completion(self.answer)
        if not self.verdict_rule:
            return FIXED
        # The claim is in the first user message (a re-ask's last message only names the format problem).
        first_user = next(m["content"] for m in json.loads(body)["messages"] if m["role"] == "user")
        return completion(opinion(" even" in first_user))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                status, headers, payload, kind = 200, b"", b"", b"application/json"
                if head.startswith(b"GET /stats"):
                    payload = json.dumps(
                        {
                            "requests": self.requests,
                            "faults": self.faults,
                            "first": self.first,
                            "last": self.last,
                            "cpu_s": time.process_time(),
                            "arrivals": self.arrivals,
                        }
                    ).encode()
                elif head.startswith((b"GET /outage/on", b"GET /outage/off")):
                    self.outage = head.startswith(b"GET /outage/on")
                    payload = json.dumps({"outage": self.outage}).encode()
                elif head.startswith(b"GET"):
                    payload = MODELS
                else:
                    self.requests += 1
                    self.arrivals.append(time.time())
                    if self.first is None:
                        self.first = time.time()
                    fault = self.random.choice(FAULTS) if self.random.random() < self.fault_rate else None
                    fault = "503" if self.outage else fault
                    self.faults += fault is not None
                    latency_s = self._latency_s(body)
                    if latency_s:
                        await asyncio.sleep(latency_s)
                    if fault == "hang":
                        await asyncio.sleep(self.hang_s)
                        return
                    if fault == "drop":
                        return
                    if fault in ("429", "500", "503"):
                        status = int(fault)
                        headers = b"retry-after: 0.05\r\n" if fault == "429" else b""
                        payload = json.dumps({"error": {"message": f"injected {fault}"}}).encode()
                    elif fault == "prose":
                        payload = completion("I believe the claim is probably right.")
                    elif fault == "truncated":
                        payload = self._reply(body)[:40]
                    elif fault == "wrong-keys":
                        payload = completion(json.dumps({"verdict": True, "why": "x"}))
                    elif fault == "empty-choices":
                        payload = b'{"id": "c", "object": "chat.completion", "created": 0, "choices": []}'
                    elif self.answer is not None and json.loads(body).get("stream") is True:
                        payload, kind = stream(self.answer), b"text/event-stream"
                        if self.token_s:
                            await self._paced(writer, payload)
                            continue
                    else:
                        payload = self._reply(body)
                head_out = f"HTTP/1.1 {status} X\r\ncontent-type: {kind.decode()}\r\ncontent-length: {len(payload)}\r\n"
                writer.write(head_out.encode() + headers + b"\r\n" + payload)
                await writer.drain()
                if not head.startswith(b"GET"):
                    self.last = time.time()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def serve(port: int, endpoint: Endpoint) -> None:
    server = await asyncio.start_server(endpoint.handle, "127.0.0.1", port, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verdict-rule", action="store_true")
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--answer", default=None, help="a fixed answer for every chat request (streamed when asked)")
    parser.add_argument("--latency-spread", type=float, default=0.0, help="latency drawn from ms * (1 ± spread)")
    parser.add_argument("--token-ms", type=float, default=0.0, help="with --answer: time between a stream's events")
    args = parser.parse_args()
    endpoint = Endpoint(
        latency_s=args.latency_ms / 1000,
        fault_rate=args.fault_rate,
        seed=args.seed,
        verdict_rule=args.verdict_rule,
        hang_s=args.hang_s,
        answer=args.answer,
        token_s=args.token_ms / 1000,
        latency_spread=args.latency_spread,
    )
    try:
        asyncio.run(serve(args.port, endpoint))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
