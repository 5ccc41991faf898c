"""The audit desk in a real headless Chromium (Debian's package, driven by Playwright) against a desk the test
starts over the scripted model endpoint: sign in, submit, watch it finish, read the highlighted span and the chain
diagram, confirm and overturn (the queue's keyboard shortcuts), see the agreement change, export CSV, upload a
batch and watch its progress bar. Screenshots go to $DEBATE_SCREENSHOTS (docs/screenshots for the README)."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.desk import WRONG, ThreadedDesk, api_keys, fake_model, jsonl, settings_for

pytestmark = pytest.mark.slow  # starts processes

playwright = pytest.importorskip("playwright.sync_api")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str | None:
    return os.environ.get("DEBATE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = _chromium()
    if executable is None:
        if os.environ.get("DEBATE_REQUIRE_BROWSER"):
            raise FileNotFoundError("Chromium is not installed (Debian: apt-get install chromium)")
        pytest.skip("no Chromium here; CI installs Debian's chromium")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def shots() -> Iterator[Path]:
    target = os.environ.get("DEBATE_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        yield Path(target)
    else:
        with tempfile.TemporaryDirectory() as folder:
            yield Path(folder)


def test_audit_review_and_export_in_a_real_browser(browser: object, tmp_path: Path, shots: Path) -> None:
    with (
        fake_model() as model,
        ThreadedDesk(
            settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url, keys=api_keys(), queue_sample_rate=1.0)
        ) as desk,
    ):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)  # type: ignore[attr-defined]
        page = context.new_page()
        dialogs: list[str] = []

        def dismissed(dialog: Any) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", dismissed)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        page.goto(desk.url + "/")
        assert "/login" in page.url
        page.get_by_label("API key").fill("root-secret-key")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(desk.url + "/")
        assert "root" in page.locator(".who").inner_text()

        page.goto(desk.url + "/dashboard")
        assert page.locator("#agreement").inner_text() == "—"
        # an empty dashboard says what will appear there
        assert "No audits yet" in page.locator("#empty-dashboard").inner_text()
        page.screenshot(path=str(shots / "dashboard-empty.png"), full_page=True)

        def submit(question: str, response: str, reference: str) -> str:
            page.goto(desk.url + "/submit")
            page.locator("#question").fill(question)
            page.get_by_label("Response to check").fill(response)
            page.locator("#reference").fill(reference)
            page.get_by_role("button", name="Submit for audit").click()
            page.wait_for_url("**/audits/*")
            # The page polls while the audit runs and reloads when it has an outcome.
            page.wait_for_selector("#audit-status[data-status=done]", timeout=30_000)
            url: str = page.url
            return url

        wrong_url = submit(
            "What is the capital of France?", f"The capital of France is {WRONG}.", "Paris is the capital of France."
        )
        assert page.locator("h1 .badge").inner_text() == "non factual"
        highlighted = page.locator("#response mark.hl-non_factual")
        assert WRONG in highlighted.first.inner_text()
        states = page.locator("#claim-c0 svg.chain g.state")
        assert states.count() >= 2 and states.first.get_attribute("data-state") == "S0"
        assert "said false" in (page.locator("#claim-c0 svg.chain text.why").first.text_content() or "")
        # the key names only the labels highlighted here, as a key; the reference and the cost wording are there
        assert page.locator("p.legend .key").all_inner_texts() == ["non factual claim"]
        assert page.locator("#reference").inner_text().strip().endswith("Paris is the capital of France.")
        assert "cost not tracked" in page.locator("main").inner_text()
        page.locator("#claim-c0 details.opinions summary").click()
        assert page.locator("#claim-c0 details.opinions dd").first.is_visible()
        page.screenshot(path=str(shots / "audit.png"), full_page=True)

        eiffel_url = submit(
            "Where is the Eiffel Tower?", "The Eiffel Tower is in Paris.", "The Eiffel Tower is in Paris."
        )
        assert page.locator("h1 .badge").inner_text() == "factual"

        # The queue: the non-factual claim first (needs review), then the sampled factual one (spot check).
        page.goto(desk.url + "/queue")
        items = page.locator(".queue-item")
        assert items.count() == 2
        assert [items.nth(k).locator(".reason").text_content() for k in range(2)] == ["needs-review", "spot-check"]
        # each card carries the claim's evidence and the deciding opinion: a review needs no second page
        for k in range(2):
            assert "Paris" in items.nth(k).locator("ol.evidence li").first.inner_text()
            assert items.nth(k).locator(".final-opinion").inner_text().startswith("Deciding opinion (debate):")
        page.screenshot(path=str(shots / "queue.png"), full_page=True)
        with page.expect_navigation():
            page.keyboard.press("c")  # confirm the first item
        assert page.locator(".queue-item").count() == 1
        page.keyboard.press("o")  # overturn the next one: the label chooser takes focus
        page.locator(".queue-item select[name=label]").select_option("non_factual")
        page.locator(".queue-item input[name=note]").fill("the tower is in Paris, but the reviewer disagrees")
        with page.expect_navigation():
            page.locator(".queue-item select[name=label]").press("Enter")
        assert page.locator(".queue-item").count() == 0

        page.goto(desk.url + "/dashboard")
        assert page.locator("#agreement").inner_text() == "50%"
        assert page.locator("figure.plot img").evaluate("img => img.complete && img.naturalWidth") == 700
        page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
        with page.expect_download() as download:
            page.locator("#export-csv").click()
        rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
        assert [(r["engine_label"], r["review_decision"], r["reviewer"]) for r in rows] == [
            ("non_factual", "confirm", "root"),
            ("factual", "overturn", "root"),
        ]

        page.goto(wrong_url)
        assert "confirmed by root" in page.locator("table.claims-summary").inner_text()
        # an overturned claim leads with the reviewer's label: the badges, the highlight, the claims table
        page.goto(eiffel_url)
        assert page.locator("h1 .badge").inner_text() == "non factual"
        assert page.locator("h1 .engine-said").inner_text() == "after review; engine said factual"
        assert page.locator("#claim-c0-title .badge").inner_text() == "overturned: non factual"
        assert page.locator("#claim-c0-title .engine-said").inner_text() == "engine said factual"
        assert "overturned: non factual engine said factual" in page.locator("table.claims-summary").inner_text()
        assert page.locator("#response mark.hl-non_factual").count() == 1
        assert page.locator("#response mark.hl-factual").count() == 0
        page.screenshot(path=str(shots / "audit-reviewed.png"), full_page=True)

        # A colleague changes the label while this page is open: confirming from the stale page is refused, the
        # page says what the label is now and leads back to it.
        eiffel_id = int(eiffel_url.rstrip("/").rsplit("/", 1)[1])
        colleague = {"decision": "overturn", "label": "not_enough_evidence", "seen_label": "non_factual"}
        made = desk.client("alice").post(f"/v1/audits/{eiffel_id}/claims/c0/reviews", json=colleague)
        assert made.status_code == 201, made.text
        page.locator("form[aria-label='Review claim c0'] button[value=confirm]").click()
        alert = page.get_by_role("alert").inner_text()
        assert alert.startswith("not saved: the label of claim c0 changed while you were reviewing it"), alert
        assert "it is now not enough evidence, by alice's overturn" in alert
        page.get_by_role("link", name="Back to the claim, as it now stands").click()
        assert page.locator("#claim-c0-title .badge").inner_text() == "overturned: not enough evidence"

        # A batch upload and its progress bar.
        upload = tmp_path / "batch.jsonl"
        upload.write_bytes(
            jsonl(
                [
                    {
                        "id": str(i),
                        "question": "Capital of France?",
                        "response": f"Paris {i}.",
                        "reference": "Paris is the capital of France.",
                    }
                    for i in range(3)
                ]
            )
        )
        page.goto(desk.url + "/submit")
        page.locator("#file").set_input_files(str(upload))
        page.locator("#batch-name").fill("nightly")
        # the task is a required choice: the browser will not send the form without it
        page.get_by_role("button", name="Upload").click()
        assert page.locator("#batch-task").evaluate("select => select.validity.valueMissing") is True
        assert page.url.endswith("/submit")
        page.locator("#batch-task").select_option("qa")
        page.get_by_role("button", name="Upload").click()
        page.wait_for_url("**/batches/*")
        assert page.locator("#batch-task").inner_text() == "qa"
        playwright.expect(page.locator("#batch-count")).to_have_text(re.compile(r"^3 / 3"), timeout=30_000)
        assert page.locator("#batch-bar").get_attribute("value") == "3"
        page.screenshot(path=str(shots / "batch.png"), full_page=True)

        # A response that is markup stays text.
        page.goto(desk.url + "/submit")
        page.get_by_label("Response to check").fill("<script>alert('owned')</script><img src=x onerror=alert(2)>")
        page.get_by_role("button", name="Submit for audit").click()
        page.wait_for_selector("#audit-status[data-status=done]", timeout=30_000)
        assert "<script>alert('owned')</script>" in page.locator("#response").inner_text()
        page.goto(desk.url + "/")
        page.screenshot(path=str(shots / "audits.png"), full_page=True)
        assert dialogs == [] and errors == []
        context.close()


def test_api_docs_render_offline_under_the_desk_policy(browser: object, tmp_path: Path) -> None:
    """/docs is Swagger UI from the installed fastapi-offline package: nothing is fetched from beyond the desk,
    and the page runs under the same content security policy as every other page (no inline script)."""
    with fake_model() as model, ThreadedDesk(settings_for(f"sqlite:///{tmp_path}/d.sqlite", model.base_url)) as desk:
        context = browser.new_context()  # type: ignore[attr-defined]
        page = context.new_page()
        outside: list[str] = []
        violations: list[str] = []
        errors: list[str] = []

        def only_the_desk(route: Any) -> None:
            if route.request.url.startswith(desk.url):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", only_the_desk)
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        response = page.goto(desk.url + "/docs")
        assert response is not None and "script-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_selector(".opblock", timeout=30_000)
        assert "markov-debate audit desk" in page.locator(".info .title").inner_text()
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        spec = httpx.get(desk.url + "/openapi.json").json()
        assert len(paths) == sum(len(operations) for operations in spec["paths"].values()) >= 10
        page.locator(".opblock-summary-path", has_text="/v1/audits/{audit_id}/report").first.click()
        page.wait_for_selector(".opblock.is-open")
        favicon = httpx.get(desk.url + "/favicon.ico")
        assert favicon.status_code == 200 and favicon.headers["content-type"] == "image/x-icon"
        assert outside == [] and violations == [] and errors == []
        context.close()
