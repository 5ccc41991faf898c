"""Sampling, labels and whitespace handling of the benchmark loaders (fixtures copied from ../shared/data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.data import DataError, factprompts_items, halueval_items, labels_for, sample_indices
from tests.support.helpers import FIXTURES

DATA = FIXTURES / "data"


def test_sampling_is_deterministic_and_seed_dependent() -> None:
    assert sample_indices(100, 10, 0) == sample_indices(100, 10, 0)
    assert sample_indices(100, 10, 0) != sample_indices(100, 10, 1)
    assert sample_indices(100, 10, 3) == sorted(set(sample_indices(100, 10, 3)))
    assert sample_indices(5, None, 0) == sample_indices(5, 50, 0) == [0, 1, 2, 3, 4]
    assert labels_for(20, 7, balanced=False) == labels_for(20, 7, balanced=False)


def test_balanced_labels_are_exactly_half() -> None:
    for n in (10, 11, 80):
        shown = labels_for(n, 5, balanced=True)
        assert len(shown) == n and sum(shown) == n // 2
    unbalanced = labels_for(1000, 5, balanced=False)
    assert 400 < sum(unbalanced) < 600  # p = 0.5 per item


@pytest.mark.parametrize("task", ["qa", "dialogue", "summarization", "general"])
def test_items_are_stripped_and_labelled(task: str) -> None:
    items = list(halueval_items(task, data_dir=DATA, n=None, seed=0))  # type: ignore[arg-type]
    assert len(items) == (12 if task == "summarization" else 40)
    for item in items:
        for text in (item.response, item.question, item.reference):
            assert text is None or text == text.strip()
    raw = [json.loads(line) for line in (DATA / "halueval" / f"{task}_data.jsonl").read_text().splitlines()]
    if task == "summarization":
        assert all(r["right_summary"].endswith("\n") for r in raw)  # the artifact the stripping removes
        for item, record in zip(items, raw, strict=True):
            expected = record["hallucinated_summary" if not item.label_factual else "right_summary"].strip()
            assert item.response == expected and item.reference == record["document"].strip()
    if task == "general":
        assert [i.label_factual for i in items] == [r["hallucination"] == "no" for r in raw]


def test_same_seed_same_items_and_balance_option() -> None:
    first = [i.model_dump() for i in halueval_items("qa", data_dir=DATA, n=10, seed=3)]
    again = [i.model_dump() for i in halueval_items("qa", data_dir=DATA, n=10, seed=3)]
    assert first == again and len(first) == 10
    balanced = list(halueval_items("qa", data_dir=DATA, n=10, seed=3, balanced=True))
    assert sum(i.label_factual for i in balanced) == 5


def test_knowledge_free_setting_drops_the_knowledge() -> None:
    items = list(halueval_items("dialogue", data_dir=DATA, n=3, seed=0, knowledge=False))
    assert all(i.reference is None and i.question for i in items)


def test_factprompts_counts_match_the_paper() -> None:
    responses = list(factprompts_items(data_dir=DATA, level="response", n=None, seed=0))
    assert len(responses) == 50 and sum(i.label_factual for i in responses) == 23
    claims = list(factprompts_items(data_dir=DATA, level="claim", n=None, seed=0))
    assert len(claims) == 233 and sum(i.label_factual for i in claims) == 177
    assert all(i.claims == [i.response] for i in claims)
    assert all(r.claims and len(r.claims) >= 1 for r in responses)


def test_bad_record_names_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "halueval"
    folder.mkdir()
    (folder / "qa_data.jsonl").write_text(
        json.dumps({"knowledge": "k", "question": "q", "right_answer": "a", "hallucinated_answer": "b"})
        + "\n"
        + json.dumps({"knowledge": "k", "question": "q", "right_answer": 3, "hallucinated_answer": 4})
        + "\n"
    )
    with pytest.raises(DataError, match=r"qa_data.jsonl line 2: field '(right|hallucinated)_answer'"):
        list(halueval_items("qa", data_dir=tmp_path, n=None, seed=0))
    with pytest.raises(DataError, match="data file not found"):
        list(halueval_items("dialogue", data_dir=tmp_path, n=None, seed=0))
