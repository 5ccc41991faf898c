"""One way to write a label: `label_factual` is a JSON boolean in JSON lines and the word true or false in a CSV
cell; every other form is an error record naming its line, never text kept and ignored. Each form goes through a
batch (run_batch, a scripted client), the fit (`debate dynamics fit`) and the reader the desk's upload uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from debate import DebateConfig, Verifier, VerifierConfig
from debate.cli import main
from debate.results import read_items_with_fields, run_batch
from debate.testing import ScriptedChatClient
from tests.support.helpers import op

GOOD_JSON: list[Any] = [True, False]
BAD_JSON: list[Any] = ["true", "false", "True", 1, 0, "yes", "", "null", [True], {"v": True}]
GOOD_CELLS = {"true": True, "false": False, "TRUE": True, "False": False, " true ": True}
BAD_CELLS = ["yes", "no", "1", "0", "t", "verdadero"]


async def _batch(source: Path, out: Path) -> None:
    client = ScriptedChatClient({"debate": [lambda request: op("Paris" in request.messages[-1].content)] * 400})
    config = VerifierConfig(debate=DebateConfig(min_rounds=0, max_rounds=1))
    async with Verifier(config=config, client=client) as verifier:
        await run_batch(verifier=verifier, input_path=source, output_path=out, items_in_flight=4)


def _line(i: int, label: Any) -> dict[str, Any]:
    return {
        "id": f"q{i}",
        "question": "Capital of France?",
        "response": "Paris" if i % 2 else "Lyon",
        "label_factual": label,
    }


async def test_every_json_form_is_a_boolean_label_or_an_error_naming_its_line(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    forms = GOOD_JSON * 4 + BAD_JSON
    source.write_text("".join(json.dumps(_line(i, form)) + "\n" for i, form in enumerate(forms)))
    await _batch(source, out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for i, (form, record) in enumerate(zip(forms, records, strict=True)):
        if isinstance(form, bool):
            assert record["label_factual"] is form and "result" in record
        else:
            assert record["error"]["message"].startswith(f"line {i + 1}: field 'label_factual': "), record
            assert "must be true or false" in record["error"]["message"]
    desk = {line: error for line, _, _, error in read_items_with_fields(source)}  # the desk's upload reads so
    assert [line for line, error in desk.items() if error is not None] == list(range(9, len(forms) + 1))


async def test_every_csv_word_is_a_boolean_label_or_an_error_and_the_fit_reads_them(tmp_path: Path) -> None:
    source, out = tmp_path / "in.csv", tmp_path / "out.jsonl"
    cells = [*GOOD_CELLS, *BAD_CELLS, ""]
    rows = ["id,question,response,label_factual"]
    rows += [f"q{i},Capital of France?,{'Paris' if i % 2 else 'Lyon'},{cell}" for i, cell in enumerate(cells)]
    source.write_text("\n".join(rows) + "\n")
    await _batch(source, out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for i, (cell, record) in enumerate(zip(cells, records, strict=True)):
        if cell in GOOD_CELLS:
            assert record["label_factual"] is GOOD_CELLS[cell], record  # a boolean in the record, not the text
        elif cell == "":
            assert "label_factual" not in record and "result" in record
        else:
            assert record["error"]["message"].startswith(f"line {i + 2}: field 'label_factual'"), record


def test_a_fully_labelled_csv_is_fitted_with_its_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    source, out = tmp_path / "in.csv", tmp_path / "out.jsonl"
    rows = ["id,question,response,label_factual"]
    rows += [
        f"q{i},Capital of France?,{'Paris' if i % 2 else 'Lyon'},{'TRUE' if i % 2 else 'false'}" for i in range(12)
    ]
    source.write_text("\n".join(rows) + "\n")
    asyncio.run(_batch(source, out))
    assert main(["dynamics", "fit", str(out), "--bootstrap", "10", "--save", str(tmp_path / "cal.json")]) == 0
    said = capsys.readouterr()
    assert "without labels" not in said.out + said.err and "share of factual claims 0.500 (the labels')" in said.out
    fitted = json.loads((tmp_path / "cal.json").read_text())
    assert fitted["labels"] is None and fitted["fitted_on"]["claims"] == 12  # a labelled fit: no assumption stated
