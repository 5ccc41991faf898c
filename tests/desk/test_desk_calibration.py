"""The desk's calibration loop, end to end in process: claims scored with a calibration, reviewed on the desk; the
reviews exported and fitted into a new calibration, which the running desk takes without a restart (each audit's
report names the file that scored it); the panel shows the file, its reliability against the reviewers, and drift
since the fit."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from debate.calibration import Calibration
from debate.cli import main
from debate.config import DebateConfig
from experiments.dynamics.calibrate import calibration_of
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.readers import read_log, read_store
from experiments.dynamics.replicate import design_of
from markov_debate.desk.calibrated import DRIFT_ECE, DRIFT_MIN_CLAIMS
from markov_debate.desk.store import Store
from markov_debate.desk.tables import AuditRow, GuardDecisionRow
from markov_debate.guard.settings import GuardSettings
from tests.guard.conftest import GOOD, SOURCES, GuardServer
from tests.support.calibration import calibration, save_calibration
from tests.support.desk import ThreadedDesk, api_keys, settings_for, wait_done
from tests.support.fakes import Call, FakeOpenAI, Reply
from tests.support.helpers import op

FRANCE = {"question": "What is the capital of France?", "reference": "Paris is the capital of France."}


def _agree(call: Call) -> Reply:
    return Reply(content=op(True))


def _submit(client: httpx.Client, n: int) -> list[int]:
    ids = []
    for i in range(n):
        response = client.post("/v1/audits", json={**FRANCE, "response": "x", "claims": [f"Claim {i} is true."]})
        assert response.status_code == 202, response.text
        ids.append(int(response.json()["id"]))
    return ids


def _review(client: httpx.Client, audits: list[int]) -> None:
    """Every claim the engine (and p_factual, near 1) called factual; the reviewers confirm half and overturn the
    other half: the calibration is far too sure."""
    for i, audit in enumerate(audits):
        url = f"/v1/audits/{audit}/claims/c0/reviews"
        body = {"decision": "confirm"} if i % 2 else {"decision": "overturn", "label": "non_factual", "note": "no"}
        done = client.post(url, json=body)
        assert done.status_code == 201, done.text


def _replace(path: Path, text: str) -> str:
    fresh = path.with_name("fresh.json")
    fresh.write_text(text)
    stat = path.stat()
    fresh.replace(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a new file, whatever the clock
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reviews_become_a_calibration_the_running_desk_takes_and_drift_is_shown(tmp_path: Path) -> None:
    cal = Path(save_calibration(tmp_path, calibration(model="fake-model")))
    first_sha = hashlib.sha256(cal.read_bytes()).hexdigest()
    with FakeOpenAI(routes={"debate": _agree}) as model:
        settings = settings_for(f"sqlite:///{tmp_path}/desk.sqlite", model.base_url, keys=api_keys())
        verifier = settings.verifier.model_copy(update={"debate": DebateConfig(calibration=str(cal))})
        with ThreadedDesk(settings.model_copy(update={"verifier": verifier})) as desk:
            sam, alice = desk.client("sam"), desk.client("alice")
            audits = _submit(sam, DRIFT_MIN_CLAIMS)
            reports: list[dict[str, Any]] = [wait_done(sam, a)["report"] for a in audits]
            assert {r["calibration"]["sha256"] for r in reports} == {first_sha}
            before = alice.get("/v1/calibration").json()
            assert before["sha256"] == first_sha and before["reviewed"] is None and before["drift"] is None

            _review(alice, audits)
            panel = alice.get("/v1/calibration").json()
            assert panel["reviewed"]["claims"] == DRIFT_MIN_CLAIMS and panel["reviewed"]["ece"] > DRIFT_ECE
            assert panel["since_fit"]["claims"] == DRIFT_MIN_CLAIMS  # the hand calibration predates every review
            assert panel["drift"].startswith("p_factual has drifted: ECE ")
            page = alice.get("/dashboard", headers={"Accept": "text/html"}).text
            assert 'id="drift"' in page and "p_factual has drifted" in page and first_sha[:12] in page
            diagram = alice.get("/dashboard/reliability.png")
            assert diagram.status_code == 200 and diagram.content.startswith(b"\x89PNG")

            # the reviews, exported, are the labels of a new fit
            export = tmp_path / "export.jsonl"
            export.write_text(alice.get("/v1/audits/export", params={"format": "jsonl"}).text)
            run = read_log(export)
            assert sorted(bool(label) for label, _, _ in run.finals.values()) == [False] * 15 + [True] * 15
            assert None not in {label for label, _, _ in run.finals.values()}
            # the store read directly (`debate dynamics fit --db URL`) holds the same debates and labels
            stored = read_store(settings.db_url)
            assert stored.finals == run.finals
            assert stored.observations == run.observations and stored.run_dir == settings.db_url
            saved = tmp_path / "from-db.json"
            assert main(["dynamics", "fit", "--db", settings.db_url, "--bootstrap", "20", "--save", str(saved)]) == 0
            assert Calibration.model_validate_json(saved.read_text()).fitted_on.claims == DRIFT_MIN_CLAIMS
            # the export and the store it came from, fitted together: each debate once, and said (issue 83)
            both = tmp_path / "both.json"
            argv = ["dynamics", "fit", str(export), "--db", settings.db_url, "--bootstrap", "20", "--save", str(both)]
            assert main(argv) == 0
            fitted_on = Calibration.model_validate_json(both.read_text()).fitted_on
            assert fitted_on.claims == DRIFT_MIN_CLAIMS
            assert fitted_on.claims_per_input == {str(export): DRIFT_MIN_CLAIMS, settings.db_url: 0}
            fitted = fit_model(run.observations, bootstrap=0, designs=[design_of(run)])
            new_sha = _replace(cal, calibration_of(fitted, [run]).model_dump_json())

            # the running desk scores the next audit with the new file, and the panel names it
            [later] = _submit(sam, 1)
            report = wait_done(sam, later)["report"]
            assert report["calibration"]["sha256"] == new_sha
            # the reviewers taught it that such claims are right half the time
            old = reports[0]["claims"][0]["p_factual"]
            assert old > 0.9 and abs(report["claims"][0]["p_factual"] - 0.5) < 0.1
            after = alice.get("/v1/calibration").json()
            assert after["sha256"] == new_sha and after["fitted_on"].startswith(f"{DRIFT_MIN_CLAIMS} claims of ")
            assert after["since_fit"] is None and after["drift"] is None  # nothing reviewed since this fit
            # a submitter sees the figures of its own audits only
            assert sam.get("/v1/calibration").json()["reviewed"]["claims"] == DRIFT_MIN_CLAIMS


def test_a_fit_from_a_store_that_is_not_there_says_so(tmp_path: Path, capsys: Any) -> None:
    """`--db` on a SQLite file that does not exist is refused naming it (opening it would create an empty store), a
    URL that is not one is named, and a password in a URL never reaches the output."""
    missing = tmp_path / "nowhere.sqlite"
    assert main(["dynamics", "fit", "--db", f"sqlite:///{missing}"]) == 2
    assert f"no desk store at {missing}" in capsys.readouterr().err and not missing.exists()
    assert main(["dynamics", "fit", "--db", "not a url"]) == 2
    assert "not a database URL" in capsys.readouterr().err
    assert main(["dynamics", "fit"]) == 2
    assert "--db URL" in capsys.readouterr().err
    empty = tmp_path / "empty.sqlite"
    Store(f"sqlite:///{empty}").close()
    assert main(["dynamics", "fit", "--db", f"sqlite:///{empty}"]) == 2
    assert f"sqlite:///{empty}: no finished debate to fit" in capsys.readouterr().err
    assert main(["dynamics", "fit", "--db", "postgresql://ann:s3cret@127.0.0.1:1/desk"]) == 2
    err = capsys.readouterr().err
    assert "s3cret" not in err and "127.0.0.1:1" in err


def _upstream_answer() -> FakeOpenAI:
    """The model the guard protects: it answers every question with the cited answer."""
    return FakeOpenAI(responder=lambda body: Reply(content=GOOD))


def _population(call: Call) -> Reply:
    """Claim i is factual when i is even; the agents get most claims right (each verdict 90%) and every fifth one
    wrong (80%), each verdict drawn from the hash of what the agent is asked (a rule on what it is asked)."""
    found = re.search(r"Claim (\d+) is", call.asked)
    if found is None:
        return Reply(content=op(True))
    i = int(found.group(1))
    truth, right = i % 2 == 0, 0.2 if i % 5 == 0 else 0.9
    draw = int(hashlib.sha256(f"{call.purpose}|{call.asked}".encode()).hexdigest()[:8], 16) / 16**8
    return Reply(content=op(truth if draw < right else not truth))


def _review_in_order(client: httpx.Client, count: int) -> list[tuple[int, str]]:
    """The first `count` claims of the label-next order, each reviewed with its truth."""
    queue = client.get("/v1/review-queue", params={"order": "label-next", "limit": count, "sample": 0}).json()
    assert len(queue) == count and {q["reason"] for q in queue} == {"label-next"} and all(q["why"] for q in queue)
    for q in queue:
        truth = "factual" if int(re.findall(r"\d+", q["text"])[0]) % 2 == 0 else "non_factual"
        body = {"decision": "confirm"} if truth == q["engine_label"] else {"decision": "overturn", "label": truth}
        done = client.post(f"/v1/audits/{q['audit_id']}/claims/{q['claim_id']}/reviews", json=body)
        assert done.status_code == 201, done.text
    return [(q["audit_id"], q["claim_id"]) for q in queue]


def _fit_db(url: str, cal: Path) -> Calibration:
    """`debate dynamics fit --db URL --save FILE` over the desk's own calibration file, then the file."""
    assert main(["dynamics", "fit", "--db", url, "--bootstrap", "10", "--save", str(cal)]) == 0
    stat = cal.stat()
    os.utime(cal, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a new file, whatever the clock
    return Calibration.model_validate_json(cal.read_text())


@pytest.mark.slow
def test_reviews_in_the_label_next_order_fit_the_file_the_desk_and_a_running_guard_score_with(tmp_path: Path) -> None:
    """The loop a team with no labels runs: audits scored, a blind fit from the store asks for labels; reviews given
    in its order become the next fit's labels; the desk and a running guard score with the new file, whose order
    asks for other claims; drift since the fit is shown."""
    cal = Path(save_calibration(tmp_path, calibration(model="fake-model")))
    with FakeOpenAI(routes={"debate": _population}) as model, _upstream_answer() as upstream:
        settings = settings_for(f"sqlite:///{tmp_path}/desk.sqlite", model.base_url, keys=api_keys())
        verifier = settings.verifier.model_copy(update={"debate": DebateConfig(calibration=str(cal))})
        with ThreadedDesk(settings.model_copy(update={"verifier": verifier})) as desk:
            sam, alice = desk.client("sam"), desk.client("alice")
            for audit in _submit(sam, 80):
                wait_done(sam, audit)
            blind = _fit_db(settings.db_url, cal)
            assert blind.labels is not None and blind.labels.labelled == 0 and blind.labels.needed == 30
            reviewed = _review_in_order(alice, 30)
            told = _fit_db(settings.db_url, cal)
            assert told.labels is not None and told.labels.labelled == 30
            asked = [a.claim for a in told.labels.label_next]
            assert asked and not {f"audit-{a}/{c}" for a, c in reviewed} & set(asked)
            new_sha = hashlib.sha256(cal.read_bytes()).hexdigest()

            # the desk and a guard running on the same store score their next answers with the new file
            [later] = _submit(sam, 1)
            assert wait_done(sam, later)["report"]["calibration"]["sha256"] == new_sha
            guard = GuardServer(GuardSettings(upstream=upstream.base_url, db_url=settings.db_url, verifier=verifier))
            with guard:
                answered = httpx.post(
                    f"{guard.base_url}/chat/completions",
                    json={
                        "model": "fake-model",
                        "messages": [{"role": "user", "content": "Capital?"}],
                        "sources": SOURCES,
                    },
                    timeout=60,
                )
            assert answered.status_code == 200, answered.text
            decided = answered.json()["verification"]
            assert decided["p_factual"] is not None
            # the guard's decision is stored (flushed as it closed) with the report that names the file scoring it
            store = Store(settings.db_url)
            try:
                with store._session() as s:
                    [report] = s.scalars(select(AuditRow.report_json).join(GuardDecisionRow)).all()
            finally:
                store.close()
            assert json.loads(report or "{}")["calibration"]["sha256"] == new_sha

            # the next reviews follow the new order, and the panel shows how p_factual holds since the fit
            _review_in_order(alice, 30)
            panel = alice.get("/v1/calibration").json()
            assert panel["sha256"] == new_sha and panel["labels"]["labelled"] == 30
            assert panel["since_fit"]["claims"] == 30
            assert (panel["drift"] is not None) == (panel["since_fit"]["ece"] > DRIFT_ECE)
