"""Retrieval speed on real HaluEval summarization documents. Prints numbers; asserts nothing.

python benchmarks/bench_retrieval.py --docs 50 [--data FILE]
(default data: $DEBATE_DATA_DIR/halueval/summarization_data.jsonl, else ../shared/data)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from itertools import islice
from pathlib import Path

from debate.evidence import BM25Retriever, DenseRetriever, RetrievalCache, document_evidence
from debate.sentences import split_sentences
from debate.types import Claim
from experiments.data import default_data_dir


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=50, help="documents to use (default: 50)")
    parser.add_argument(
        "--data", type=Path, default=None, help="HaluEval summarization JSONL (default: from DEBATE_DATA_DIR)"
    )
    args = parser.parse_args()
    data: Path = args.data or default_data_dir() / "halueval" / "summarization_data.jsonl"
    if not data.is_file():  # noqa: ASYNC240 - before any work starts
        raise SystemExit(f"bench_retrieval: no data at {data}; set DEBATE_DATA_DIR or pass --data FILE")
    with data.open() as fh:
        records = [json.loads(line) for line in islice(fh, args.docs)]
    pairs = [(r["document"], s) for r in records for s in split_sentences(r["right_summary"].strip())]
    sentences = sum(len(split_sentences(r["document"])) for r in records)
    print(f"{len(records)} documents ({sentences} sentences), {len(pairs)} claims (right-summary sentences)")

    t0 = time.perf_counter()
    DenseRetriever.model()
    print(f"dense model load: {time.perf_counter() - t0:.2f}s (once per process, not in the per-claim figures)")
    for retriever in (BM25Retriever(), DenseRetriever()):
        cache = RetrievalCache()
        wall = await _run_all(retriever, pairs, cache)
        cached = await _run_all(retriever, pairs, cache)
        print(
            f"{retriever.name}: {1000 * wall / len(pairs):.1f} ms/claim uncached, "
            f"{1000 * cached / len(pairs):.3f} ms/claim from cache ({cache.hits} hits)"
        )


async def _run_all(
    retriever: BM25Retriever | DenseRetriever, pairs: list[tuple[str, str]], cache: RetrievalCache
) -> float:
    started = time.perf_counter()
    for i, (document, claim) in enumerate(pairs):
        await document_evidence(
            Claim(id=f"c{i}", text=claim, kind="atomic"), document, retriever=retriever, k=10, source="d", cache=cache
        )
    return time.perf_counter() - started


if __name__ == "__main__":
    asyncio.run(main())
