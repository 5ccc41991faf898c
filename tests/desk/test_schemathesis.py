"""The desk's API fuzzed from its own OpenAPI document: schemathesis, every check, every phase (examples, coverage,
fuzzing, stateful through the document's links), as each role, against the desk on a real loopback port over the
scripted model. Passing means: no 5xx, every status code and content type answered is documented, every answer is
valid against the published schema, what the schema allows is accepted and what it refuses is refused.

The generator is seeded, so a run is repeatable; DEBATE_SCHEMATHESIS_EXAMPLES sets how many cases each operation
gets (longer local runs). Hooks (ndjson bodies, upload files, the tasks' own rules): tests/desk/schemathesis_hooks.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.desk import KEYS, WRONG, ThreadedDesk, api_keys, fake_model, settings_for, wait_done

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = os.environ.get("DEBATE_SCHEMATHESIS_EXAMPLES", "25")


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedDesk]:
    folder = tmp_path_factory.mktemp("schemathesis")
    with (
        fake_model() as model,
        ThreadedDesk(
            # the fuzzer sends more than a key's default submissions a minute: the quota is tested elsewhere
            settings_for(
                f"sqlite:///{folder}/desk.sqlite", model.base_url, keys=api_keys(), key_submits_per_minute=1_000_000
            )
        ) as server,
    ):
        # Finished audits (one non-factual, so the review queue holds a claim) for the roles that only read and
        # review: without them every reviewer operation would answer 404.
        with server.client("root") as client:
            for response in ("Paris is the capital of France.", f"The capital of France is {WRONG}."):
                submitted = client.post("/v1/audits", json={"question": "Capital of France?", "response": response})
                assert submitted.status_code == 202, submitted.text
                assert wait_done(client, submitted.json()["id"])["status"] == "done"
        yield server


@pytest.mark.slow  # runs schemathesis
@pytest.mark.parametrize("role", ["root", "alice", "sam"], ids=["admin", "reviewer", "submitter"])
def test_the_api_keeps_its_published_schema(desk: ThreadedDesk, role: str, tmp_path: Path) -> None:
    command = shutil.which("schemathesis")
    assert command is not None, "schemathesis is a test dependency (pip install -e '.[test]')"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SCHEMATHESIS_HOOKS": "tests.desk.schemathesis_hooks",
        "NO_COLOR": "1",
    }
    run = subprocess.run(
        [
            command,
            "run",
            f"{desk.url}/openapi.json",
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {KEYS[role][1]}",
            "--max-examples",
            EXAMPLES,
            "--seed",
            "20261126",
            "--generation-database",
            "none",
            "--report",
            "junit",
            "--report-junit-path",
            str(tmp_path / "junit.xml"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    spec = httpx.get(f"{desk.url}/openapi.json").json()
    operations = sum(len(methods) for methods in spec["paths"].values())
    # every operation the schema publishes was selected and tested
    assert f"{operations}/{operations}" in run.stdout, run.stdout[-3000:]
    report = (tmp_path / "junit.xml").read_text()
    assert "<testcase" in report and "<failure" not in report


def test_the_published_schema_states_this_desks_round_limits(desk: ThreadedDesk) -> None:
    """The overrides' rules are the serving desk's own: max_rounds alone may not go below its min_rounds."""
    with httpx.Client(base_url=desk.url) as client:
        overrides = client.get("/openapi.json").json()["components"]["schemas"]["AuditOverrides"]
        floor = overrides["allOf"][-1]["then"]["properties"]["max_rounds"]["anyOf"][0]["minimum"]
        assert floor == desk.app.state.settings.verifier.debate.min_rounds
        below = {"response": "Paris.", "overrides": {"max_rounds": floor - 1}} if floor > 1 else None
        if below is not None:
            refused = client.post("/v1/audits", json=below, headers={"Authorization": f"Bearer {KEYS['root'][1]}"})
            assert refused.status_code == 422, refused.text
