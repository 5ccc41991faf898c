"""Retrieval speed on real HaluEval summarization documents. Prints numbers; asserts nothing.

python benchmarks/bench_retrieval.py --docs 50 [--data ../shared/data/halueval/summarization_data.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from itertools import islice
from pathlib import Path

from debate.retrieval import BM25Retriever, DenseRetriever, RetrievalCache, document_evidence, split_sentences
from debate.types import Claim

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "halueval" / "summarization_data.jsonl"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=50)
    parser.add_argument("--data", type=Path, default=DEFAULT)
    args = parser.parse_args()
    with args.data.open() as fh:
        records = [json.loads(line) for line in islice(fh, args.docs)]
    pairs = [(r["document"], s) for r in records for s in split_sentences(r["right_summary"].strip())]
    sentences = sum(len(split_sentences(r["document"])) for r in records)
    print(f"{len(records)} documents ({sentences} sentences), {len(pairs)} claims (right-summary sentences)")

    t0 = time.perf_counter()
    DenseRetriever.model()
    print(f"dense model load: {time.perf_counter() - t0:.2f}s")
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
