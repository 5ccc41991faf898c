"""`/metrics` in the Prometheus text format (the prometheus-client library), on the desk and the guard: requests by
route and status and their latency, from an ASGI middleware on every request (refusals before the app included);
the rest read when Prometheus scrapes, from what each server already knows (the store's queue, the worker's
endpoint state, the calibration's drift; the guard's actions, decisions and judge).

Each app has a registry of its own (two apps in one process, as in the tests, never share counts). Routes are
labelled by their template (`/v1/audits/{audit_id}`), never the path a client sent, so a scanner cannot grow the
series without bound; a request no route took is `other`, one refused before routing `refused`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_TYPE", "HttpMetrics", "Reading", "Readings", "metrics_response"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Reading = tuple[str, str, list[tuple[dict[str, str], float]]]
"""A figure read at scrape time: (name, help, [(labels, value)]). A name ending in `_total` is a counter (a count
since start, which only grows: what rate() and increase() take), any other a gauge."""


class Readings(Collector):
    """Figures read when Prometheus scrapes: `read()` gives each (name, help, samples); a failing read leaves its
    figures out of that scrape (the scrape still answers: `*_up`-style gauges say what is down)."""

    def __init__(self, read: Callable[[], Iterable[Reading]]) -> None:
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, text, samples in self.read():
            labels = sorted({key for sample, _ in samples for key in sample})
            family: GaugeMetricFamily | CounterMetricFamily = (
                CounterMetricFamily(name.removesuffix("_total"), text, labels=labels)
                if name.endswith("_total")
                else GaugeMetricFamily(name, text, labels=labels)
            )
            for sample, value in samples:
                family.add_metric([sample.get(key, "") for key in labels], value)
            yield family


class HttpMetrics:
    """ASGI middleware: `<prefix>_http_requests_total{route,method,status}` and
    `<prefix>_http_request_duration_seconds{route,method}` (to the response's last byte)."""

    def __init__(self, app: ASGIApp, *, registry: CollectorRegistry, prefix: str) -> None:
        self.app = app
        self.requests = Counter(
            f"{prefix}_http_requests",
            "HTTP requests answered, by route template, method and status",
            ["route", "method", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            f"{prefix}_http_request_duration_seconds",
            "Time from the request's arrival to its response's last byte, by route template and method",
            ["route", "method"],
            registry=registry,
            buckets=_BUCKETS,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or ("other" if "router" in scope else "refused")
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            self.requests.labels(name, method, str(status or 499)).inc()  # 499: the client left first
            self.latency.labels(name, method).observe(time.perf_counter() - started)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def metrics_response(registry: CollectorRegistry) -> Response:
    return Response(generate_latest(registry), media_type=CONTENT_TYPE)
