"""Search backends: the Serper-compatible HTTP client against a server on 127.0.0.1, and the local collection."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from debate import DebateConfig, Verifier, VerifierConfig
from debate.config import SearchConfig
from debate.errors import EvidenceUnavailableError
from debate.evidence import LocalCollectionSearch, SerperSearch, factool_snippets
from debate.testing import ScriptedChatClient
from tests.support.helpers import op

BODY = {
    "answerBox": {"title": "Reactors", "answer": "94 reactors", "link": "https://example.org/box"},
    "organic": [
        {
            "title": "Nuclear power in the US",
            "link": "https://example.org/a",
            "snippet": "The US operates 94 reactors.",
        },
        {"title": "No snippet", "link": "https://example.org/b"},
        {"title": "Other", "link": "https://example.org/c", "snippet": "France operates 56 reactors."},
    ],
}


class FakeSerper:
    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.body: dict[str, Any] = BODY
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []
        app = FastAPI()

        @app.post("/search")
        async def search(request: Request) -> JSONResponse:
            self.requests.append((json.loads(await request.body()), dict(request.headers)))
            status = self.statuses.pop(0) if self.statuses else 200
            if status != 200:
                return JSONResponse({"message": "scripted"}, status_code=status, headers={"Retry-After": "0"})
            return JSONResponse(self.body)

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"


@pytest.fixture
def serper(request: pytest.FixtureRequest) -> Iterator[FakeSerper]:
    fake = FakeSerper(getattr(request, "param", []))
    fake.thread.start()
    while not fake.server.started:
        time.sleep(0.01)
    yield fake
    fake.server.should_exit = True
    fake.thread.join(timeout=10)


async def test_serper_hits_and_key(serper: FakeSerper) -> None:
    backend = SerperSearch(SearchConfig(backend="serper", base_url=serper.url, api_key="k-123"))
    hits = await backend.search("US reactors", 3)
    # Factool's rule: an answer box is the evidence alone (its source, "None" in Factool, is named here).
    assert [(h.title, h.snippet, h.url) for h in hits] == [("Reactors", "94 reactors", "serper:answerBox")]
    serper.body = {k: v for k, v in BODY.items() if k != "answerBox"}
    hits = await backend.search("US reactors", 3)
    await backend.aclose()
    assert [(h.title, h.snippet, h.url) for h in hits] == [
        ("Nuclear power in the US", "The US operates 94 reactors.", "https://example.org/a"),
        ("Other", "France operates 56 reactors.", "https://example.org/c"),
    ]
    body, headers = serper.requests[0]
    assert body == {"q": "US reactors", "num": 6} and headers["x-api-key"] == "k-123"  # Factool reads 2k results
    assert SearchConfig(backend="serper", api_key="k").results_per_query == 5  # Factool's 5 per query


@pytest.mark.parametrize("serper", [[429, 503]], indirect=True)
async def test_serper_retries_transient_errors(serper: FakeSerper) -> None:
    backend = SerperSearch(SearchConfig(backend="serper", base_url=serper.url, api_key="k"))
    hits = await backend.search("q", 2)
    await backend.aclose()
    assert len(hits) == 1 and len(serper.requests) == 3


@pytest.mark.parametrize("serper", [[401, 401]], indirect=True)
async def test_serper_rejected_key_fails_at_once(serper: FakeSerper) -> None:
    backend = SerperSearch(SearchConfig(backend="serper", base_url=serper.url, api_key="bad"))
    with pytest.raises(EvidenceUnavailableError, match="HTTP 401"):
        await backend.search("q", 2)
    await backend.aclose()
    assert len(serper.requests) == 1


@pytest.mark.parametrize("serper", [[500] * 10], indirect=True)
async def test_search_failure_makes_the_claim_unverifiable(serper: FakeSerper) -> None:
    client = ScriptedChatClient(
        [json.dumps({"claims": ["The US has 94 reactors."]}), json.dumps({"queries": ["US reactors", "94 reactors"]})]
    )
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        search=SearchConfig(backend="serper", base_url=serper.url, api_key="k", max_attempts=2),
    )
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify("The US has 94 reactors.", task="kbqa")
    claim = report.claims[0]
    assert claim.status == "unverifiable" and claim.factual is None and claim.debate is None
    assert claim.reason is not None and "HTTP 500" in claim.reason
    assert report.verdict == "unverifiable" and len(client.calls) == 2  # no debate call on missing evidence


async def test_serper_evidence_reaches_the_debate(serper: FakeSerper) -> None:
    client = ScriptedChatClient(
        [json.dumps({"claims": ["The US has 94 reactors."]}), json.dumps({"queries": ["US reactors"]}), op(True)]
    )
    config = VerifierConfig(
        debate=DebateConfig(min_rounds=0, max_rounds=0),
        search=SearchConfig(
            backend="serper", base_url=serper.url, api_key="k", queries_per_claim=1, results_per_query=2
        ),
    )
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify("The US has 94 reactors.", task="kbqa")
    evidence = report.claims[0].evidence
    assert [e.source for e in evidence] == ["serper:answerBox"]
    assert "[1] 94 reactors" in client.calls[2].request.messages[-1].content


def test_local_collection_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"title": "a", "text": "b"}\n{"title": "no text"}\n')
    with pytest.raises(ValueError, match=r"c.jsonl line 2: text: Field required"):
        LocalCollectionSearch(SearchConfig(backend="local", collection=str(path)))
    with pytest.raises(ValueError, match="needs `collection`"):
        SearchConfig(backend="local")


async def test_a_claims_two_queries_keep_both_snippet_lists_as_factool_does(serper: FakeSerper) -> None:
    """Factool's `run` joins the two queries' snippet lists as they come (no de-duplication); `dedupe` is a named
    variant. A search with nothing found gives Factool's placeholder, never an empty evidence list."""
    serper.body = {"organic": [{"title": "t", "link": "https://example.org/a", "snippet": "The US has 94."}]}
    replies = [json.dumps({"claims": ["The US has 94 reactors."]}), json.dumps({"queries": ["q1", "q2"]}), op(True)]
    for dedupe, expected in ((False, ["The US has 94.", "The US has 94."]), (True, ["The US has 94."])):
        client = ScriptedChatClient(list(replies))
        search = SearchConfig(backend="serper", base_url=serper.url, api_key="k", dedupe=dedupe)
        config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=0), search=search)
        async with Verifier(config=config, client=client) as verifier:
            report = await verifier.verify("The US has 94 reactors.", task="kbqa")
        assert [e.text for e in report.claims[0].evidence] == expected
    serper.body = {"organic": []}
    backend = SerperSearch(SearchConfig(backend="serper", base_url=serper.url, api_key="k"))
    hits = await backend.search("nothing", 5)
    await backend.aclose()
    assert [(h.snippet, h.url) for h in hits] == [("No good Google Search Result was found", "serper:none")]


def test_the_knowledge_graph_and_attributes_come_first_as_in_factool() -> None:
    body = {
        "knowledgeGraph": {
            "title": "Eiffel Tower",
            "type": "Tower",
            "description": "A tower in Paris.",
            "attributes": {"Height": "330 m"},
        },
        "organic": [
            {
                "title": "w",
                "link": "https://example.org/w",
                "snippet": "Built in 1889.",
                "attributes": {"Opened": "1889"},
            }
        ],
        "answerBox": {"title": "empty box"},
    }
    assert [(h.snippet, h.url) for h in factool_snippets(body, 5)] == [
        ("Eiffel Tower: Tower", "serper:knowledgeGraph"),
        ("A tower in Paris.", "serper:knowledgeGraph"),
        ("Height: 330 m", "serper:knowledgeGraph"),
        ("Built in 1889.", "https://example.org/w"),
        ("Opened: 1889", "https://example.org/w"),
    ]
    assert len(factool_snippets(body, 2)) == 2  # k snippets kept, the knowledge graph's first
