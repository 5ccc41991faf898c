"""A Report as an auditor reads it, drawn with rich on any console: testable without a parser or a terminal."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from debate.errors import DebateError
from debate.results import SEVERITY_KEY, severity_text
from debate.types import ClaimVerdict, DebateResult, Report

if TYPE_CHECKING:
    from debate.engine import MarkovChain

__all__ = ["render_report", "verdict_caveats"]


_COLOUR = {
    "factual": "green",
    "non_factual": "red",
    "not_enough_evidence": "magenta",
    "unverifiable": "yellow",
    "no_claims": "blue",
}


def _excerpt(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _claim_label(claim: ClaimVerdict) -> str:
    return claim.status if claim.status == "unverifiable" or claim.label is None else claim.label


NEXT_STEP = (
    "next: your own model (--model.base-url URL --model.model NAME), a batch (--input FILE --output LOG), "
    "or the tour (debate tour)"
)
"""The verdict box's last line on the embedded model: where a first contact goes from here."""


def render_report(
    report: Report,
    console: Console,
    *,
    brief: bool = False,
    show_prompts: bool = False,
    banner: str | None = None,
    next_step: bool = False,
) -> None:
    """The readable report, in the order an auditor reads it: the verdict, a summary of every claim with where it
    sits in the response, then (unless `brief`) per claim the evidence the agents saw, the chain with why it
    moved, and the opinions. A `banner` (e.g. that the agents were simulated) is in the verdict's own title;
    `next_step` ends the box with where to go next when the embedded model answered (a first contact)."""
    score = "n/a" if report.score is None else f"{report.score:.2f}"
    colour = _COLOUR[report.verdict]
    probability = "" if report.p_factual is None else f"  p_factual {report.p_factual:.3f}"
    lines = [f"[bold {colour}]{report.verdict.upper()}[/]  score {score}{probability}  (rollup {report.rollup})"]
    lines += [escape(line) for line in verdict_caveats(report)]
    if next_step and report.meta.embedded:
        lines.append(f"[dim]{escape(NEXT_STEP)}[/]")
    console.print(Panel.fit("\n".join(lines), title="verdict" if banner is None else f"verdict: {banner}"))
    _plain(console, f"task: {report.task}   claims: {len(report.claims)} ({report.extraction.method})")
    if report.failure is not None:
        _plain(console, f"failed ({report.failure.kind}, {report.failure.stage}): {report.failure.message}")
    elif report.note:
        _plain(console, f"note: {report.note}")
    if report.claims:
        _claims_summary(console, report)
    for dropped in report.extraction.dropped:
        _plain(console, f"dropped (nothing in the response supports it): {dropped!r}")
    if brief:
        _failed_claims(console, report)
        _usage_line(console, report)
        return
    if report.prefilter is not None:
        _render_prefilter(console, report)
    chain = _report_chain(report)
    for index, claim in enumerate(report.claims, 1):
        _render_claim(console, index, claim, chain, show_prompts=show_prompts)
    _usage_line(console, report)


def _claims_summary(console: Console, report: Report) -> None:
    """Every claim in one table: label, p_factual (with a calibration), severity, who decided, where it sits."""
    summary = Table(title="claims", title_justify="left", show_edge=False)
    calibrated = report.calibration is not None
    columns = (
        "#",
        "label",
        *(("p_factual",) if calibrated else ()),
        "sev",
        "decided by",
        "claim",
        "in the response",
    )
    for column in columns:
        summary.add_column(column, overflow="fold")
    for index, claim in enumerate(report.claims, 1):
        label = _claim_label(claim)
        where = (
            "; ".join(f"[{s.start}:{s.end}] {_excerpt(report.response[s.start : s.end], 50)!r}" for s in claim.spans)
            or "-"
        )
        p = ("-" if claim.p_factual is None else f"{claim.p_factual:.3f}",) if calibrated else ()
        summary.add_row(
            str(index),
            f"[{_COLOUR.get(label, 'white')}]{label}[/]",
            *p,
            "-" if claim.error_severity is None else str(claim.error_severity),
            claim.decided_by,
            escape(_excerpt(claim.text, 70)),
            escape(where),
        )
    console.print(summary)
    _plain(console, SEVERITY_KEY)


def verdict_caveats(report: Report) -> list[str]:
    """What the verdict line must say with it (in --brief too): nothing was checked, a cheap check rated the risk
    moderate or high, the verdicts are the embedded 135M demonstration model's, or p_factual is not calibrated (the
    failed check named) or missing."""
    caveats = []
    if report.verdict == "no_claims":
        caveats.append("nothing in the response was checked: it has no checkable claim")
    for check in report.prefilter.checks if report.prefilter is not None else []:
        if check.risk_level in ("moderate", "high"):
            caveats.append(f"{check.name} rated the risk {check.risk_level}: {_excerpt(check.reason, 100)}")
    if report.meta.embedded:
        caveats.append("a 135M demonstration model (embedded): its verdicts say nothing about the method's accuracy")
    contradicting, turns = _contradicting_turns(report)
    if contradicting:
        caveats.append(
            f"{contradicting} of {turns} agent replies open their text with the opposite of their verdict field "
            '(e.g. "False, but..." with factuality true); the verdict field is what counts'
        )
    if report.calibration is not None:
        if report.calibration.warning:
            caveats.append(report.calibration.warning)
        if report.p_factual is None and report.calibration.response_note:
            caveats.append(f"no p_factual for the response: {report.calibration.response_note}")
    return caveats


_OPENING = re.compile(r"^\W*(\w+)\W*?(?:[,.:;!]|$)")
"""A reply's opening word when it stands alone ("False, but...", "Yes."), not when it starts a sentence ("No
doubt...")."""
_SAYS_TRUE = frozenset({"true", "yes", "correct", "factual", "accurate"})
_SAYS_FALSE = frozenset({"false", "no", "incorrect", "wrong", "inaccurate", "hallucinated"})


def _contradicting_turns(report: Report) -> tuple[int, int]:
    """(replies whose text opens with a yes/no word against their factuality field, replies): the parse reads the
    field only, and a reader of the opinion column would otherwise take the text's word for the verdict."""
    contradicting = turns = 0
    for claim in report.claims:
        for state in claim.debate.states if claim.debate is not None else []:
            for turn in state.turns:
                if turn.factuality is None or not turn.opinion:
                    continue
                turns += 1
                opening = _OPENING.match(turn.opinion.split("\n", 1)[0])
                word = opening.group(1).lower() if opening is not None else ""
                contradicting += word in (_SAYS_FALSE if turn.factuality else _SAYS_TRUE)
    return contradicting, turns


def _report_chain(report: Report) -> MarkovChain | None:
    from debate.engine import load_chain

    """The chain the report ran with, to check each move against its rule; None if it cannot be loaded here."""
    name = str(report.meta.config.get("debate", {}).get("chain", "true-to-skeptic"))
    try:
        return load_chain(name)
    except (DebateError, OSError, ValueError):
        return None


def _render_prefilter(console: Console, report: Report) -> None:
    p = report.prefilter
    assert p is not None
    _plain(
        console,
        f"prefilter ({', '.join(p.prefilters)}): {p.decided} claims decided without debate, "
        f"{p.prefilter_calls} prefilter calls, "
        f"at least {p.debate_calls_saved} debate calls saved ({p.net_calls_saved:+d} net of the prefilter calls)"
        + (f"; {p.note}" if p.note else ""),
    )
    for check in p.checks:
        _plain(console, f"{check.name}: risk {check.risk_level}: {check.reason}")
        if check.judge is not None and check.judge.rubric is not None:
            r = check.judge.rubric
            _plain(
                console,
                f"  judge: {r.decision} (score {r.score:.2f}, confidence {r.confidence:.2f}, hallucination_risk "
                f"{r.hallucination_risk:.2f}); notes: {r.hallucination_notes.strip() or '(none)'}",
            )
        if check.judge is not None and check.judge.action is not None:
            _plain(console, f"  action: {check.judge.action} (combined risk {check.judge.combined_risk})")
        if check.hallucination_check is not None and check.hallucination_check.warning:
            _plain(console, f"  warning: {check.hallucination_check.warning}")


def team_line(debate: DebateResult) -> str:
    """Which teams of the cascade spoke, where each left P(factual), and which decided."""
    parts = []
    for team in debate.teams:
        p = "-" if team.p_factual is None else f"{team.p_factual:.3f}"
        if not team.turns and team.out_of_reach is not None:
            parts.append(f"{team.name} (skipped: {team.out_of_reach})")
            continue
        reach = f"; handed over: {team.out_of_reach}" if team.out_of_reach is not None else ""
        parts.append(f"{team.name} ({team.turns} turns, {team.usage.llm_calls} calls, p_factual {p}{reach})")
    last = debate.teams[-1]
    ending = f"decided by {last.name}" if last.decided else f"undecided when the list ended (after {last.name})"
    said = [f"{t.name}'s calibration: {t.warning}" for t in debate.teams if t.calibrated is False and t.warning]
    if sum(1 for t in debate.teams if t.turns) > 1:
        # The line a user reads for this claim says what its p_factual assumes, not only the docs.
        said.append("p_factual takes the later team's turns as independent of the earlier's given the label")
    return " -> ".join(parts) + f": {ending}" + "".join(f"; {s}" for s in said)


def _render_claim(
    console: Console, index: int, claim: ClaimVerdict, chain: MarkovChain | None, *, show_prompts: bool
) -> None:
    label = _claim_label(claim)
    console.print(f"\n[bold]claim {index}[/] ({claim.claim_id}): {escape(claim.text)}", highlight=False)
    if claim.status == "unverifiable":
        kind = f" ({claim.failure.kind})" if claim.failure is not None else ""
        console.print(f"  [yellow]unverifiable[/]{kind}: {escape(claim.reason or '')}", highlight=False)
    else:
        severity = severity_text(claim.error_severity)
        console.print(
            f"  [{_COLOUR.get(label, 'white')}]{label}[/]   error severity: {severity}   decided by: {claim.decided_by}"
        )
    if claim.evidence:
        _plain(console, f"  evidence ({len(claim.evidence)}):")
        for number, item in enumerate(claim.evidence, 1):
            source = f" [{item.kind}: {item.source}]" if item.source else f" [{item.kind}]"
            _plain(console, f"    [{number}] {_excerpt(item.text, 200)}{source}")
    else:
        _plain(console, "  evidence: none (judged from the model's own knowledge)")
    for located in claim.localized:
        _plain(console, f"  {located.role} ({located.element}): [{located.evidence + 1}] {_excerpt(located.text, 160)}")
    for decision in claim.prefilters:
        _plain(console, f"  prefilter {decision.name}: {decision.decision} ({decision.reason})")
    if claim.debate is None:
        return
    from debate.engine import explain_moves

    d = claim.debate
    consensus = "n/a" if d.consensus is None else str(d.consensus).lower()
    moves = explain_moves(d, chain)
    path = "  ".join(f"{s.name}" + (f" ({why})" if why else "") for s, why in zip(d.states, moves, strict=True))
    _plain(console, f"  chain: {path}")
    _plain(console, f"  rounds: {d.rounds}   consensus: {consensus}   stopped: {d.stop_reason}")
    if d.teams and not d.choices:
        _plain(console, f"  cascade: {team_line(d)}")
    for choice in d.choices:
        # voi: the line says why this team spoke this turn, or why the debate stopped
        _plain(console, f"  voi turn {choice.turn}: {choice.why}")
    _turn_table(console, d)
    if show_prompts:
        _prompts(console, d)


def _turn_table(console: Console, d: DebateResult) -> None:
    table = Table(show_lines=True)
    # A team with a model per role (or a cascade) says which model spoke each turn; one model needs no column.
    models = len({t.call.model for state in d.states for t in state.turns if t.call.model is not None}) > 1
    for column in ("state", "round", "agent", *(["model"] if models else []), "factual", "sev", "opinion"):
        table.add_column(column, overflow="fold")
    for state in d.states:
        for turn in state.turns:
            table.add_row(
                state.name,
                str(state.round),
                turn.role,
                *([turn.call.model or "-"] if models else []),
                "-" if turn.factuality is None else str(turn.factuality),
                "-" if turn.error_severity is None else str(turn.error_severity),
                escape(turn.opinion or "") if turn.error is None else f"[yellow]{escape(turn.error or '')}[/]",
            )
    console.print(table)


def _prompts(console: Console, d: DebateResult) -> None:
    for state in d.states:
        for turn in state.turns:
            console.print(
                f"  [bold]{state.name} round {state.round} {turn.role}[/] "
                f"(prompt {turn.call.prompt} {turn.call.prompt_hash[:12]})"
            )
            for message in turn.call.messages or []:
                _plain(console, f"    --- {message.role} ---")
                _plain(console, "\n".join(f"    {line}" for line in message.content.splitlines()))


def _failed_claims(console: Console, report: Report) -> None:
    """--brief: each unverifiable claim's reason and the calls it got (a call that failed is not counted as
    made, so a claim whose endpoint never answered reads 0, and says why)."""
    for index, claim in enumerate(report.claims, 1):
        if claim.status != "unverifiable":
            continue
        failure = claim.failure
        why = claim.reason or (failure.message if failure is not None else "no reason recorded")
        kind = f" ({failure.kind}, {failure.stage})" if failure is not None else ""
        calls = claim.usage.llm_calls
        _plain(
            console,
            f"claim {index} unverifiable{kind}: {why}; {calls} model call(s) answered for it"
            + ("" if calls else " (failed attempts are not counted)"),
        )


def _usage_line(console: Console, report: Report) -> None:
    u = report.usage
    _plain(
        console,
        f"{report.models_said()}   calls: {u.llm_calls}   tokens: {u.prompt_tokens} prompt + "
        f"{u.completion_tokens} completion   time: {report.elapsed_s:.1f}s",
    )
