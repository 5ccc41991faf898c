"""Claim detection, task-aware (paper sections 3.1 and 4.1.2).

- qa: question + answer form one claim (no model call).
- summarization, kbqa, general: an LLM decomposes the text into atomic claims (or RefChecker triplets).
- dialogue: first the subjective filter (paper Table 9); `None` means nothing factual is left; then extraction.
Extraction replies are validated like every model reply: bounded re-asks, then an ExtractionError for the response.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from debate.calls import ask_structured, converse, load_json_object, load_prompt
from debate.errors import ExtractionError, ReplyUnusableError
from debate.llm import ChatClient
from debate.prefilter import CitationVariant, cited_ids
from debate.sentences import claim_length, sentence_spans
from debate.types import Claim, ExtractionInfo, Span

__all__ = ["Extraction", "LLMClaimExtractor", "RagClaims", "SubjectiveFilter", "qa_claim", "rag_claims"]


_MARKER = re.compile(r"\s*\[[^\[\]\n]{1,200}\]")


_FULL_STOP = re.compile(r"[.。।۔]$")


@dataclass
class RagClaims:
    """A RAG answer's claims, and what was not made a claim (said in the report's note)."""

    claims: list[Claim]
    short: int = 0
    """Sentences shorter than the minimum claim length."""
    capped: int = 0
    """Claims beyond `max_claims`."""

    def notes(self, min_chars: int, max_claims: int | None) -> list[str]:
        short = f"{self.short} sentence(s) shorter than {min_chars} characters (a CJK character counts 3)"
        return [
            *([f"{short} are not claims"] if self.short else []),
            *([f"{self.capped} claim(s) beyond max_claims={max_claims} were dropped"] if self.capped else []),
        ]


def rag_claims(
    answer: str,
    variant: CitationVariant = "seed",
    *,
    min_chars: int = 15,
    max_claims: int | None = None,
    language: str | None = None,
) -> RagClaims:
    """RAG answers: each sentence (debate.sentences, any language, any case) is a claim, with the ids it cites
    (read as the citation rules' variant reads them, so the claim and the answer checks agree) and its span. The
    text the agents see has the [id] markers and a final full stop removed, as the logprob grounding source shows
    its claims; a text shorter than `min_chars` (15, that source's minimum claim length) is not a claim."""
    claims: list[Claim] = []
    short = 0
    for span in sentence_spans(answer, language):
        sentence = answer[span.start : span.end]
        text = _FULL_STOP.sub("", _MARKER.sub("", sentence).strip()).strip()
        if claim_length(text) < min_chars:
            short += bool(text)
            continue
        claims.append(
            Claim(id=f"c{len(claims)}", text=text, kind="atomic", citations=cited_ids(sentence, variant), spans=[span])
        )
    capped = max(0, len(claims) - max_claims) if max_claims is not None else 0
    return RagClaims(claims[: len(claims) - capped], short=short, capped=capped)


def qa_claim(*, question: str | None, answer: str) -> Claim:
    """HaluEval-QA setting: the question and answer together are the one claim; it spans the whole answer."""
    text = f"Question: {question.strip()}\nAnswer: {answer.strip()}" if question else answer.strip()
    start = len(answer) - len(answer.lstrip())
    return Claim(id="c0", text=text, kind="qa_pair", spans=[Span(start=start, end=len(answer.rstrip()))])


@dataclass
class Extraction:
    claims: list[Claim]
    info: ExtractionInfo
    notes: list[str] = field(default_factory=list)


_CLAIMS_SCHEMA: dict[str, object] = {
    "type": "object",
    # Plain strings, or Factool's own {"claim": ...} objects (its prompt asks for those).
    "properties": {
        "claims": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"type": "string", "minLength": 3, "maxLength": 400},
                    {
                        "type": "object",
                        "properties": {"claim": {"type": "string", "minLength": 3, "maxLength": 400}},
                        "required": ["claim"],
                    },
                ]
            },
        }
    },
    "required": ["claims"],
}
_TRIPLETS_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "triplets": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "string", "maxLength": 200}, "minItems": 3, "maxItems": 3},
        }
    },
    "required": ["triplets"],
}
_FORMATS = {
    "sentence": 'a JSON object {"claims": ["<claim 1>", "<claim 2>", ...]}',
    "triplet": 'a JSON object {"triplets": [["<subject>", "<predicate>", "<object>"], ...]}',
}


def _parse_sentences(reply: str) -> list[tuple[str, tuple[str, str, str] | None]]:
    raw = load_json_object(reply)
    items = raw.get("claims")
    if not isinstance(items, list):
        raise ReplyUnusableError('"claims" must be a list')
    out: list[tuple[str, tuple[str, str, str] | None]] = []
    for item in items:
        # Factool's own format is a list of {"claim": ...}; accept it too.
        text = item.get("claim") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise ReplyUnusableError('every claim must be a string (or {"claim": "..."})')
        if text.strip():
            out.append((text.strip(), None))
    return out


def _parse_triplets(reply: str) -> list[tuple[str, tuple[str, str, str] | None]]:
    raw = load_json_object(reply)
    items = raw.get("triplets")
    if not isinstance(items, list):
        raise ReplyUnusableError('"triplets" must be a list')
    out: list[tuple[str, tuple[str, str, str] | None]] = []
    for item in items:
        if isinstance(item, dict):
            item = [item.get("subject"), item.get("predicate"), item.get("object")]
        if not (isinstance(item, list) and len(item) == 3 and all(isinstance(p, str) and p.strip() for p in item)):
            raise ReplyUnusableError("every triplet must be three non-empty strings [subject, predicate, object]")
        s, p, o = (part.strip() for part in item)
        out.append((triplet_sentence(s, p, o), (s, p, o)))
    return out


def triplet_sentence(subject: str, predicate: str, obj: str) -> str:
    """A triplet rendered back to a sentence for the debate."""
    return re.sub(r"\s+", " ", f"{subject} {predicate} {obj}").strip().rstrip(".") + "."


class LLMClaimExtractor:
    """Decomposes a text into atomic claims (sentences or triplets) with one model call (plus bounded re-asks)."""

    def __init__(
        self,
        client: ChatClient,
        *,
        format: Literal["sentence", "triplet"],
        max_claims: int | None,
        max_retries: int,
        prompts_dir: str | None = None,
        prompt: str | None = None,
    ) -> None:
        self._client = client
        self._format = format
        self._max_claims = max_claims
        self._max_retries = max_retries
        # The paper detects claims with Factool's method; triplets are RefChecker's.
        default = "factool_claims" if format == "sentence" else "extract_triplets"
        self._prompt = load_prompt(prompt or default, prompts_dir)

    @property
    def method(self) -> str:
        return f"llm-{self._format}s"

    async def extract(self, text: str, *, context: str | None) -> Extraction:
        system, user = self._prompt.render(text=text.strip(), context=(context or "(none)").strip())
        schema = _CLAIMS_SCHEMA if self._format == "sentence" else _TRIPLETS_SCHEMA
        chat = converse(self._client, system, schema=schema, schema_name="claims", purpose="extract")
        parse = _parse_sentences if self._format == "sentence" else _parse_triplets
        outcome = await ask_structured(
            chat, user, parse, max_retries=self._max_retries, expected=_FORMATS[self._format]
        )
        info = ExtractionInfo(
            method=self.method,
            prompts={self._prompt.name: self._prompt.sha256},
            attempts=outcome.attempts,
            parse_errors=outcome.errors,
            usage=outcome.usage,
        )
        if outcome.value is None:
            raise ExtractionError(f"claim extraction failed: {outcome.failure}")
        unique = list(dict.fromkeys(outcome.value))
        notes = []
        if self._max_claims is not None and len(unique) > self._max_claims:
            notes.append(
                f"{len(unique) - self._max_claims} extracted claims beyond max_claims={self._max_claims} were dropped"
            )
            unique = unique[: self._max_claims]
        kind: Literal["atomic", "triplet"] = "atomic" if self._format == "sentence" else "triplet"
        claims = [Claim(id=f"c{i}", text=t, kind=kind, triplet=tri) for i, (t, tri) in enumerate(unique)]
        return Extraction(claims=claims, info=info, notes=notes)


_NONE_REPLY = re.compile(r"^\W*none\W*$", re.I)


def _parse_filtered(reply: str) -> str | None:
    text = reply.strip()
    text = re.sub(r"^(factual part|response|output)\s*:\s*", "", text, flags=re.I).strip()
    if not text:
        raise ReplyUnusableError("the reply is empty; give the factual part of the response, or None")
    if _NONE_REPLY.match(text):
        return None
    return text


@dataclass
class Filtered:
    text: str | None
    info: ExtractionInfo


class SubjectiveFilter:
    """Removes purely subjective content from a dialogue response (paper Table 9)."""

    def __init__(self, client: ChatClient, *, max_retries: int, prompts_dir: str | None = None) -> None:
        self._client = client
        self._max_retries = max_retries
        self._prompt = load_prompt("subjective_filter", prompts_dir)

    async def filter(self, response: str, *, history: str | None) -> Filtered:
        # The paper's Table 9 filter sees the response alone; a prompt set may also declare the dialogue history.
        values = {"history": (history or "(none)").strip(), "response": response.strip()}
        system, user = self._prompt.render(**{k: v for k, v in values.items() if k in self._prompt.variables})
        chat = converse(self._client, system, schema=None, schema_name="filtered", purpose="subjective_filter")
        # `None` is a valid answer here, so success is tracked apart from the value.
        parsed: list[str | None] = []

        def parse(reply: str) -> bool:
            parsed.append(_parse_filtered(reply))
            return True

        outcome = await ask_structured(
            chat, user, parse, max_retries=self._max_retries, expected="the factual part of the response, or None"
        )
        info = ExtractionInfo(
            method="subjective-filter",
            prompts={self._prompt.name: self._prompt.sha256},
            attempts=outcome.attempts,
            parse_errors=outcome.errors,
            usage=outcome.usage,
        )
        if outcome.value is None:
            raise ExtractionError(f"subjective filter failed: {outcome.failure}")
        return Filtered(text=parsed[-1], info=info)
