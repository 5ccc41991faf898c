"""The results table every run, ablation and report prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["markdown_table"]


def _fmt(metrics: dict[str, Any], key: str) -> str:
    value, ci = metrics.get(key), metrics.get(f"{key}_ci95")
    if value is None:
        return "n/a"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{value:.3f}"


_HEADERS = ["method", "n", "accuracy", "F1 (factual)", "F1 (hallucination)", "AUROC", "unverifiable", "calls/item"]


def markdown_table(rows: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The results table (GitHub Markdown, via tabulate), each metric with its 95% interval."""
    body = [
        [
            name,
            m["n"],
            _fmt(m, "accuracy"),
            _fmt(m, "f1"),
            _fmt(m, "f1_hallucination"),
            _fmt(m, "auroc"),
            m["unverifiable"],
            "-" if m.get("llm_calls_per_item") is None else f"{m['llm_calls_per_item']:.1f}",
        ]
        for name, m in rows
    ]
    from tabulate import tabulate  # the experiments extra

    return tabulate(body, headers=_HEADERS, tablefmt="github", disable_numparse=True) + "\n"
