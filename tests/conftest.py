"""Fixtures every test folder shares; helpers are in tests.support."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.properties import Reached

pytest_plugins = ["tests.support.timing"]  # what each test starts, for .ci/durations.py

# Generated-input tests: "ci" (the default) keeps the suite inside CI's time; `pytest --hypothesis-profile long`
# runs 20 times as many examples locally.
settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@pytest.fixture(scope="session")
def embedded_server() -> Iterator[str]:
    """One real llama.cpp server with the embedded SmolLM2 model for the whole session."""
    from debate.llm._embedded import EmbeddedServer

    with EmbeddedServer() as server:
        yield server.base_url


@pytest.fixture
def reached() -> Iterator[Reached]:
    """A property's outcome counter (tests.support.properties): created once for all of a @given test's examples,
    checked after the last one."""
    counter = Reached()
    yield counter
    counter.check()


@pytest.fixture
def no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEBATE_MODEL"):
        monkeypatch.delenv(name, raising=False)


os.environ.setdefault("NO_COLOR", "1")
# CI passes --durations and --junitxml in PYTEST_ADDOPTS (.ci/run); pytest has read them by now. A pytest that a test
# starts (a docs block's, a plugin's) must not inherit them and write over CI's junit file. It loads no Phoenix client
# plugin either, as this suite does not (pyproject's addopts): it imports the whole Phoenix server, 8 s a process, and
# no user test here uses it.
os.environ["PYTEST_ADDOPTS"] = "-p no:phoenix"


# --- Running in parallel (pytest-xdist) -----------------------------------------------------------------------------
# `python -m pytest` runs on every core (pyproject's `-n auto`); naming single tests (`path::test`), --pdb or -n 0
# runs in this process, as a contributor who re-runs one failure expects.
# Tests that share a costly fixture run on one worker, so it starts once: a module-scoped fixture's tests are grouped
# by module, and every test of the embedded model shares one llama.cpp server. The longest tests go out first, so no
# worker is left with a long test at the end while the other idles.

SHARED_SESSION_FIXTURES = {"embedded_server": "embedded"}
"""Session fixtures whose process is costly enough to keep to one worker: fixture -> group."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for `-n auto`: DEBATE_TEST_WORKERS, else one per core, else none when single tests are named."""
    if os.environ.get("DEBATE_TEST_WORKERS"):
        return int(os.environ["DEBATE_TEST_WORKERS"])
    if config.args and all("::" in arg for arg in config.args):
        return 0
    return os.cpu_count() or 1


def _group(item: pytest.Item) -> str | None:
    if item.get_closest_marker("embedded"):
        return "embedded"
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in info.names_closure:
        if name in SHARED_SESSION_FIXTURES:
            return SHARED_SESSION_FIXTURES[name]
        definitions = info.name2fixturedefs.get(name)
        if definitions and definitions[-1].scope in ("module", "package"):
            return item.nodeid.split("::", 1)[0]
    return None


PROCESS_FIXTURES = {"postgres", "pg", "embedded_server", "phoenix", "browser"}
"""Fixtures that start a server process (PostgreSQL, llama.cpp, Phoenix, Chromium): a test using one is `slow`."""


def _starts_a_process(item: pytest.Item) -> bool:
    """A test that uses a process fixture, or is parametrized over the PostgreSQL store (its fixture asks for the
    server at run time, which collection cannot see)."""
    callspec = getattr(item, "callspec", None)
    on_postgres = callspec is not None and "postgres" in [str(v) for v in callspec.params.values()]
    return on_postgres or bool(PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())))


def _weight(item: pytest.Item) -> int:
    """Heaviest first: the embedded model, then tests that start processes, then the rest (collection order kept
    within each)."""
    if item.get_closest_marker("embedded"):
        return 0
    return 1 if item.get_closest_marker("slow") else 2


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _starts_a_process(item) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_weight)
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _cli_signal_state() -> Iterator[None]:
    """`debate.cli.main` called in process (as a test feeds a command) sets the process's SIGTERM handling the way
    the CLI wants it; this puts it back after each test, so no later test of the same worker runs under it."""
    import signal

    import debate.concurrency

    handler, cancels = signal.getsignal(signal.SIGTERM), debate.concurrency._SIGTERM_CANCELS
    yield
    if handler is not None:  # None: set outside Python, and then left alone
        signal.signal(signal.SIGTERM, handler)
    debate.concurrency._SIGTERM_CANCELS = cancels


def _no_skip_in_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    """In CI (DEBATE_REQUIRE_INTEGRATIONS=1), a skipped test or module is a failed one: an `importorskip` of a
    package the CI installs (playwright, ray) or any other skip would otherwise pass unseen; CI runs every test."""
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("DEBATE_REQUIRE_INTEGRATIONS") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every test must run (DEBATE_REQUIRE_INTEGRATIONS=1): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _no_skip_in_ci(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _no_skip_in_ci(outcome.get_result())  # type: ignore[attr-defined]
