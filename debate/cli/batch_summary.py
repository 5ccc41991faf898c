"""What a finished batch says: its summary line's changes (lines redone, labels updated, records whose line is gone)
and its exit code."""

from __future__ import annotations

import argparse
import sys

from debate.cli.cost import cost_line
from debate.pipeline import Price, team_cost
from debate.results import BatchSummary

__all__ = ["batch_exit", "changes_said"]


def changes_said(summary: BatchSummary) -> str:
    """What a re-run found changed in its input, for the summary line ("" when nothing did)."""
    parts = [
        f"{summary.changed} changed line(s) redone" if summary.changed else "",
        f"{summary.setting_redone} redone for changed settings (--redo)" if summary.setting_redone else "",
        f"{summary.labels_updated} label(s) updated" if summary.labels_updated else "",
        f"{summary.updated} record(s) updated (fields or line numbers)" if summary.updated else "",
        f"{summary.gone} record(s) whose line is gone" if summary.gone else "",
    ]
    said = ", ".join(p for p in parts if p)
    if summary.history is not None:
        said += f" (old records kept in {summary.history})"
    return f", {said}" if said else ""


def cascade_line(summary: BatchSummary, prices: dict[str, Price | None]) -> str | None:
    """Under the cascade stop: the claims each team decided, and each team's cost (None otherwise)."""
    if not summary.cascade:
        return None
    decided = ", ".join(f"{n} by {team}" for team, (n, _) in summary.cascade.items())
    costs = []
    for team, (_, usage) in summary.cascade.items():
        cost = team_cost(usage, prices)[0]
        calls = sum(u.llm_calls for u in usage.values())
        costs.append(f"{team} {calls} calls" + (f", ${cost:.4f}" if cost is not None else ", no price known"))
    return f"cascade: claims decided {decided}, {summary.undecided} undecided when the list ended; {'; '.join(costs)}"


def batch_exit(args: argparse.Namespace, summary: BatchSummary, prices: dict[str, Price | None]) -> int:
    print(f"usage: {cost_line(summary.usage_by_model, prices)}", file=sys.stderr)
    cascade = cascade_line(summary, prices)
    if cascade is not None:
        print(cascade, file=sys.stderr)
    if summary.no_model_answered:
        print(
            f"debate: error: no model call succeeded in this run ({summary.unfinished} item(s) unfinished; last: "
            f"{summary.last_failure}); check the endpoint, then re-run the same command to redo them",
            file=sys.stderr,
        )
        return 1
    if summary.stopped is not None:
        print(
            f"{summary.stopped}; finished records are kept, re-run with a higher --max-cost to resume", file=sys.stderr
        )
        return 4
    if summary.fail_on_matched:
        print(f"--fail-on {args.fail_on}: {summary.fail_on_matched} record(s) matched", file=sys.stderr)
        return 3
    return 0
