"""What a finished batch says: its summary line's changes (lines redone, labels updated, records whose line is gone)
and its exit code."""

from __future__ import annotations

import argparse
import sys

from debate.cli.cost import cost_line
from debate.pipeline import Price, team_cost
from debate.results import BatchSummary

__all__ = ["batch_exit", "changes_said", "done_line", "gate_exit"]


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
        said += f"{', ' if said else ''}{summary.kept} old record(s) kept in {summary.history}"
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


def done_line(summary: BatchSummary, output: object, *, written: bool = True) -> str:
    """The batch's summary line: the input lines not checked first (when any), then what this run wrote."""
    tally = summary.log
    head = f"{tally.said()}; " if tally.unchecked else ""
    if not written:
        return f"{head}done: 0 written{changes_said(summary)}, {summary.skipped_done} already done -> {output}"
    return (
        f"{head}done: {summary.processed} written ({summary.factual} factual, {summary.non_factual} non-factual, "
        + (f"{summary.not_enough_evidence} not enough evidence, " if summary.not_enough_evidence else "")
        + (f"{summary.no_claims} with no checkable claim, " if summary.no_claims else "")
        + f"{summary.unverifiable} unverifiable, {summary.failed} failed, {summary.errors} errors)"
        f"{changes_said(summary)}, {summary.redone} redone, {summary.skipped_done} already done -> {output}"
    )


def gate_exit(args: argparse.Namespace, summary: BatchSummary) -> int:
    """The exit status the log as a whole earns: 5 when an input line was not checked (unless
    --tolerate-unchecked) or when none was, 3 when a checked verdict matches --fail-on, else 0."""
    tally = summary.log
    if tally.lines == 0:
        print("debate: error: the input holds no line: nothing was verified", file=sys.stderr)
        return 5
    if tally.checked == 0:
        print(
            f"debate: error: no input line was verified ({tally.said()}); fix the lines or the endpoint and re-run",
            file=sys.stderr,
        )
        return 5
    if tally.unchecked and not args.tolerate_unchecked:
        print(
            f"debate: error: {tally.said()}; fix them and re-run (the rest stand), or accept them with "
            "--tolerate-unchecked",
            file=sys.stderr,
        )
        return 5
    if tally.fail_on_matched:
        print(f"--fail-on {args.fail_on}: {tally.fail_on_matched} record(s) matched", file=sys.stderr)
        return 3
    return 0


def batch_exit(
    args: argparse.Namespace,
    summary: BatchSummary,
    prices: dict[str, Price | None],
    endpoints: dict[str, str] | None = None,
) -> int:
    """The usage and cascade lines, then the exit status: 1 when no model call succeeded, 4 when the cost limit
    stopped the batch, else the gate's (gate_exit)."""
    print(f"usage: {cost_line(summary.usage_by_model, prices, endpoints)}", file=sys.stderr)
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
    return gate_exit(args, summary)
