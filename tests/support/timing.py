"""Where the suite's time goes: a pytest plugin that records what each test starts, so a timing report can sum the
suite's seconds by folder and by the servers, processes and generators the tests use (`.ci/durations.py`).

What a test starts is observed, not declared: every process it launches (`subprocess.Popen`, which asyncio and
Playwright use too) and every uvicorn server it builds in process is classified, and the kinds are written to the
test's `starts` property, which `--junitxml` keeps. A session fixture is charged to the test that first needed it,
which is where its start-up time is spent. The test's `cpu` property is the CPU seconds it used, its own threads and
the processes it started and waited for (a server it leaves running for later tests is charged when it is stopped).
"""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Callable, Generator, Sequence
from typing import Any

import pytest

_current: set[str] | None = None
"""The kinds the running test has started (None between tests)."""
_cpu_at_start = 0.0


def cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for (a `debate` run, pip, a server it stopped)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def process_kind(argv: Sequence[object]) -> str:
    """The kind of a process by its command line."""
    words = " ".join(str(a) for a in argv)
    program = os.path.basename(str(argv[0])) if argv else ""
    if "multiprocessing" in words:
        return "worker processes (multiprocessing)"
    if program == "debate" or "debate.cli" in words:
        return "debate command"
    if program in {"initdb", "pg_ctl", "createdb", "postgres", "runuser"} and "postgres" in words:
        return "PostgreSQL"
    if "playwright" in words or program == "chromium":
        return "Chromium"
    if "llama_cpp.server" in words:
        return "embedded model"
    if "schemathesis" in words:
        return "schemathesis"
    if program == "phoenix":
        return "Phoenix"
    if program == "nginx":
        return "nginx"
    if " pip " in f" {words} " or "mkdocs" in words or "pytest" in words or program == "inspect":
        return "pip, mkdocs, pytest, inspect"
    return "other processes"


def server_kind(app: Any) -> str:
    """The kind of an in-process uvicorn server by the app it serves."""
    title = str(getattr(app, "title", ""))
    module = type(app).__module__
    if "audit desk" in title:
        return "desk (in process)"
    if "guard" in title or module.startswith("markov_debate.guard"):
        return "guard (in process)"
    return "scripted endpoint (in process)"


def _note(kind: str) -> None:
    if _current is not None:
        _current.add(kind)


def _wrap(original: Callable[..., None], classify: Callable[..., str]) -> Callable[..., None]:
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> None:
        _note(classify(*args, **kwargs))
        original(self, *args, **kwargs)

    return wrapped


def _popen_kind(args: Any, *_: Any, **__: Any) -> str:
    return process_kind([args] if isinstance(args, str | bytes | os.PathLike) else list(args))


def _uvicorn_kind(config: Any, *_: Any, **__: Any) -> str:
    return server_kind(getattr(config, "app", None))


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _wrap(subprocess.Popen.__init__, _popen_kind)  # type: ignore[method-assign]
    try:
        import uvicorn
    except ImportError:  # the core install's tests start no server
        return
    uvicorn.Server.__init__ = _wrap(uvicorn.Server.__init__, _uvicorn_kind)  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    global _current, _cpu_at_start
    _current = set()
    _cpu_at_start = cpu_seconds()
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        _current.add("hypothesis")
    try:
        yield
    finally:
        _current = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, None, None]:
    # Written on every phase's report: teardown's is the last, and junitxml reads the properties from it.
    if _current is not None:
        item.user_properties[:] = [p for p in item.user_properties if p[0] not in ("starts", "cpu")]
        item.user_properties.append(("starts", ";".join(sorted(_current)) or "nothing"))
        item.user_properties.append(("cpu", f"{cpu_seconds() - _cpu_at_start:.2f}"))
    yield
