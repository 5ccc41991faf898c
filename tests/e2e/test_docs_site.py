"""The docs site builds with `mkdocs build --strict`: a broken link, a page left out of the nav, a generated
reference that fails (the CLI's --help, the Report's schema, the API's docstrings) all fail here, as in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT

pytestmark = pytest.mark.slow  # starts processes


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    site = tmp_path / "site"
    reference = (site / "cli-reference" / "index.html").read_text()
    assert "debate verify" in reference and "debate tour" in reference and "--fail-on" in reference
    schema = (site / "schema" / "index.html").read_text()
    assert "&quot;verdict&quot;" in schema or '"verdict"' in schema
    assert "VerifierConfig" in (site / "api" / "index.html").read_text()


def test_every_docs_page_is_in_the_nav() -> None:
    from tests.e2e.test_readme import docs_pages

    listed = {page.name for page in docs_pages()}
    assert listed == {page.name for page in (ROOT / "docs").glob("*.md")}
    assert (ROOT / "README.md").read_text().count("\n") < 150
