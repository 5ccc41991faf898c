"""Benchmark items (HaluEval, FactPrompts; fetched by `debate data fetch`): streamed, seeded, whitespace-stripped.

For qa, dialogue and summarization each sampled record yields one item: its hallucinated output with probability
0.5, else its right output (paper section 4.1.1), from a seeded RNG. Every text is stripped before anything sees it:
all right summaries end with a newline and many right dialogue responses carry whitespace, which would give the label
away (see the data README).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from debate.errors import UsageError
from experiments.datasets import DatasetName, data_dir_for

__all__ = [
    "HALUEVAL_FILES",
    "PAIRED_FIELDS",
    "DataError",
    "Item",
    "default_data_dir",
    "factprompts_items",
    "halueval_items",
    "halueval_records",
    "labels_for",
    "sample_indices",
]

HaluTask = Literal["qa", "dialogue", "summarization", "general"]
HALUEVAL_FILES: dict[HaluTask, str] = {
    "qa": "qa_data.jsonl",
    "dialogue": "dialogue_data.jsonl",
    "summarization": "summarization_data.jsonl",
    "general": "general_data.jsonl",
}


PAIRED_FIELDS: dict[str, tuple[str, str, str | None, str]] = {
    "qa": ("right_answer", "hallucinated_answer", "question", "knowledge"),
    "dialogue": ("right_response", "hallucinated_response", "dialogue_history", "knowledge"),
    "summarization": ("right_summary", "hallucinated_summary", None, "document"),
}
"""HaluEval tasks with a right and a hallucinated output per record: (right, hallucinated, question, reference)."""


class DataError(UsageError):
    """A data file is missing or a record is malformed (the message names file and line)."""


class Item(BaseModel):
    """One evaluation item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    """Stable id: benchmark, task and source line (plus claim index for claim-level items)."""
    task: Literal["qa", "dialogue", "summarization", "general", "kbqa"]
    """The verification setting."""
    label_factual: bool
    """Ground truth; the positive class is `factual`."""
    response: str
    """The text to judge."""
    question: str | None = None
    """Question, user query or dialogue history."""
    reference: str | None = None
    """Knowledge or document (None when the setting gives none)."""
    claims: list[str] | None = None
    """Annotated claims to verify instead of extracting them (FactPrompts)."""
    source_line: int = Field(ge=1)
    """Line of the record in its file."""

    def content_sha256(self) -> str:
        """The digest of what decides this item's prediction (all but its label and line): its record keeps it, so
        a run resumed over a changed data file redoes the items whose data changed."""
        decided = self.model_dump(mode="json", exclude={"label_factual", "source_line"})
        return hashlib.sha256(json.dumps(decided, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def default_data_dir(dataset: DatasetName | None = None) -> Path:
    """Where `dataset` is read from: DEBATE_DATA_DIR, else the user data directory if it is installed there, else
    `shared/data` beside the checkout (see `experiments.datasets`)."""
    return data_dir_for(dataset)


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


def sample_indices(total: int, n: int | None, seed: int) -> list[int]:
    """Sorted 0-based record indices: all of them when n is None or covers the file, else a seeded sample."""
    if n is None or n >= total:
        return list(range(total))
    return sorted(random.Random(seed).sample(range(total), n))


def _sample(path: Path, total: int, n: int | None, seed: int, unit: str = "records") -> list[int]:
    """`sample_indices`, refusing a file with nothing in it and a sample larger than the file: a run named after
    the n asked must hold n items, and metrics over no item are not 0."""
    if total == 0:
        raise DataError(f"{path} has no {unit}; fetch it again with `debate data fetch` or check --data-dir")
    if n is not None and n > total:
        raise DataError(f"--n {n}: {path} has only {total} {unit}; give --n {total} or --n all")
    return sample_indices(total, n, seed)


def labels_for(n: int, seed: int, *, balanced: bool) -> list[bool]:
    """Which items show the hallucinated output: p = 0.5 each (seeded), or exactly half when balanced."""
    rng = random.Random(seed + 1)  # a stream apart from the record sample's
    if balanced:
        shown = [True] * (n // 2) + [False] * (n - n // 2)
        rng.shuffle(shown)
        return shown
    return [rng.random() < 0.5 for _ in range(n)]


def _records(path: Path, wanted: list[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line, record) for the wanted 0-based record indices, streaming the file."""
    targets = iter(wanted)
    target = next(targets, None)
    index = -1
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            index += 1
            if index != target:
                continue
            record = _record(path, number, raw)
            if not isinstance(record, dict):
                raise DataError(f"{path} line {number}: expected a JSON object")
            yield number, record
            target = next(targets, None)
            if target is None:
                return


def _record(path: Path, number: int, raw: bytes) -> Any:
    """One JSONL line of a data file (a BOM on the first line and CRLF endings are fine)."""
    if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.end].hex(" ")
        raise DataError(f"{path} line {number}: not valid UTF-8 (bytes {bad} at byte {exc.start + 1})") from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} line {number}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{path} line {number}: not readable JSON (nested too deeply or a number too long)") from exc


def _field(record: dict[str, Any], name: str, path: Path, line: int) -> str:
    value = record.get(name)
    if not isinstance(value, str):
        raise DataError(f"{path} line {line}: field {name!r} is missing or not a string")
    return value.strip()


def _file(data_dir: Path, dataset: DatasetName, *parts: str) -> Path:
    path = data_dir.joinpath(*parts)
    if not path.is_file():
        raise DataError(
            f"data file not found: {path}; fetch it with `debate data fetch {dataset}` (or point --data-dir / "
            "DEBATE_DATA_DIR at a folder that has it)"
        )
    return path


def halueval_records(task: HaluTask, data_dir: Path) -> int | None:
    """How many records the task's HaluEval file holds (None: no such file)."""
    path = data_dir / "halueval" / HALUEVAL_FILES[task]
    return _count_lines(path) if path.is_file() else None


def halueval_items(
    task: HaluTask, *, data_dir: Path, n: int | None, seed: int, balanced: bool = False, knowledge: bool = True
) -> Iterator[Item]:
    """HaluEval items, in file order. `knowledge=False` runs qa/dialogue knowledge-free (HaluEval's own setting)."""
    path = _file(data_dir, "halueval", "halueval", HALUEVAL_FILES[task])
    wanted = _sample(path, _count_lines(path), n, seed)
    shown = labels_for(len(wanted), seed, balanced=balanced)
    for k, (line, record) in enumerate(_records(path, wanted)):
        hallucinated = shown[k]
        if task in PAIRED_FIELDS:
            right, wrong, question_field, reference_field = PAIRED_FIELDS[task]
            is_knowledge = reference_field == "knowledge"
            # both answers are read, whichever is shown: a record missing one is malformed, not half an item
            answers = {name: _field(record, name, path, line) for name in (right, wrong)}
            yield Item(
                id=f"halueval-{task}-{line}",
                task=task,
                label_factual=not hallucinated,
                response=answers[wrong if hallucinated else right],
                question=_field(record, question_field, path, line) if question_field else None,
                reference=_field(record, reference_field, path, line) if knowledge or not is_knowledge else None,
                source_line=line,
            )
        else:
            flag = _field(record, "hallucination", path, line).lower()
            if flag not in ("yes", "no"):
                raise DataError(f"{path} line {line}: field 'hallucination' must be yes or no, got {flag!r}")
            # IDs repeat in this file (two records say "ID"), so the line is the id.
            yield Item(
                id=f"halueval-general-{line}",
                task="general",
                label_factual=flag == "no",
                response=_field(record, "chatgpt_response", path, line),
                question=_field(record, "user_query", path, line),
                source_line=line,
            )


def factprompts_items(
    *, data_dir: Path, level: Literal["claim", "response"], n: int | None, seed: int
) -> Iterator[Item]:
    """FactPrompts KB-QA: one item per annotated claim (claim level) or per response with its annotated claims."""
    path = _file(data_dir, "factprompts", "factool", "knowledge_qa.jsonl")
    wanted = _sample(path, _count_lines(path), n, seed) if level == "response" else None
    records = _records(path, wanted if wanted is not None else list(range(_count_lines(path))))
    produced = 0
    claim_pool: list[Item] = []
    for line, record in records:
        prompt = _field(record, "prompt", path, line)
        response = _field(record, "response", path, line)
        claims = record.get("claims")
        if not isinstance(claims, list) or not claims:
            raise DataError(f"{path} line {line}: field 'claims' must be a non-empty list")
        parsed: list[tuple[str, bool]] = []
        for j, entry in enumerate(claims):
            if not (
                isinstance(entry, dict) and isinstance(entry.get("claim"), str) and isinstance(entry.get("label"), bool)
            ):
                raise DataError(f"{path} line {line}: claims[{j}] needs a string 'claim' and a boolean 'label'")
            parsed.append((entry["claim"].strip(), entry["label"]))
        if level == "response":
            label = record.get("label")
            if not isinstance(label, bool):
                raise DataError(f"{path} line {line}: field 'label' must be a boolean")
            produced += 1
            yield Item(
                id=f"factprompts-{line}",
                task="kbqa",
                label_factual=label,
                response=response,
                question=prompt,
                claims=[c for c, _ in parsed],
                source_line=line,
            )
        else:
            for j, (claim, label) in enumerate(parsed):
                claim_pool.append(
                    Item(
                        id=f"factprompts-{line}-c{j}",
                        task="kbqa",
                        label_factual=label,
                        response=claim,
                        question=prompt,
                        claims=[claim],
                        source_line=line,
                    )
                )
    if level == "claim":
        chosen = _sample(path, len(claim_pool), n, seed, unit="annotated claims")
        yield from (claim_pool[i] for i in chosen)
