"""What the UI draws, computed from a stored Report: highlighted spans, the chain diagram, the agreement plot.

Everything here returns plain data (or an SVG we generate from numbers and our own labels); the templates escape
every text that came from a user or a model.
"""

from __future__ import annotations

import functools
import io
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from debate.engine import ChainError, MarkovChain, explain_moves, load_chain
from debate.rollup import roll_up
from debate.types import ClaimVerdict, Report, ReportVerdict, StateRecord
from markov_debate.desk.models import AgreementPoint, ReviewInfo

__all__ = [
    "ChainDiagram",
    "Segment",
    "agreement_png",
    "chain_diagrams",
    "claim_label",
    "reliability_png",
    "reviewed_claims",
    "reviewed_verdict",
    "segments",
]

_SEVERITY_ORDER = ("factual", "not_enough_evidence", "unverifiable", "non_factual")


def claim_label(claim: ClaimVerdict) -> str:
    return claim.label or "unverifiable"


@dataclass
class Segment:
    """A run of the response's text and the claims whose spans cover it."""

    text: str
    label: str | None = None
    """The most serious label among the covering claims (None: no claim covers it)."""
    claims: list[str] = field(default_factory=list)


def reviewed_claims(report: Report, reviews: Mapping[str, ReviewInfo]) -> list[ClaimVerdict]:
    """The report's claims with each reviewer's label in place of the engine's where a review overturned it (the
    latest review of a claim counts). The stored report itself is never changed."""
    out = []
    for claim in report.claims:
        review = reviews.get(claim.claim_id)
        if review is None or review.decision == "confirm":
            out.append(claim)
            continue
        factual = {"factual": True, "non_factual": False}.get(review.label)
        out.append(claim.model_copy(update={"label": review.label, "status": "verified", "factual": factual}))
    return out


def reviewed_verdict(report: Report, reviews: Mapping[str, ReviewInfo]) -> ReportVerdict | None:
    """The response's verdict under the report's own rollup rule with the reviewers' labels; None when no review
    overturned a claim (the engine's verdict stands)."""
    ids = {c.claim_id for c in report.claims}
    if not any(r.decision == "overturn" and r.claim_id in ids for r in reviews.values()):
        return None
    saved = report.meta.config
    options = (saved.get("rollup_options") or {}).get(report.rollup)
    if options is None and report.rollup == "soft" and "soft_threshold" in saved:  # a report of release 0.2
        options = {"threshold": saved["soft_threshold"]}
    return roll_up(reviewed_claims(report, reviews), rule=report.rollup, options=options).verdict


def segments(report: Report, claims: Sequence[ClaimVerdict] | None = None) -> list[Segment]:
    """The response cut at every claim-span boundary, each piece labelled by the claims covering it (`claims`:
    the report's claims as reviewed, so a highlight shows the human label where there is one)."""
    text = report.response
    cover: list[tuple[int, int, ClaimVerdict]] = [
        (max(0, s.start), min(len(text), s.end), c)
        for c in (report.claims if claims is None else claims)
        for s in c.spans
        if s.end > s.start
    ]
    cuts = sorted({0, len(text), *(a for a, _, _ in cover), *(b for _, b, _ in cover)})
    out: list[Segment] = []
    for start, end in itertools.pairwise(cuts):
        covering = [c for a, b, c in cover if a <= start and end <= b]
        label = max((claim_label(c) for c in covering), key=_SEVERITY_ORDER.index, default=None)
        out.append(Segment(text[start:end], label, list(dict.fromkeys(c.claim_id for c in covering))))
    return [s for s in out if s.text]


@dataclass
class DiagramTurn:
    role: str
    verdict: str
    severity: int | None
    opinion: str
    prompt: str


@dataclass
class DiagramState:
    name: str
    round: int
    consensus: bool | None
    turns: list[DiagramTurn]
    x: int = 0
    why_next: str | None = None
    """Why the chain moved on from here (the transition rule and the verdict it read)."""


@dataclass
class ChainDiagram:
    rule: str
    states: list[DiagramState]
    stop_reason: str
    width: int
    height: int
    box_width: int
    gap: int


_BOX_W, _GAP, _LINE_H = 190, 70, 18


def _verdict(turn: Any) -> str:
    if turn.error is not None:
        return "failed"
    if not turn.enough_evidence:
        return "not enough evidence"
    return "true" if turn.factuality else "false"


def _chain(name: str) -> MarkovChain | None:
    try:
        return load_chain(name)
    except (ChainError, OSError, ValueError):
        return None  # a chain file that exists only where the audit ran: the diagram says less, but still draws


def chain_diagrams(report: Report) -> dict[str, ChainDiagram | None]:
    """Each claim's diagram (None without a debate), by claim id; the report's chain is loaded once."""
    rule = str(report.meta.config.get("debate", {}).get("chain", "true-to-skeptic"))
    chain = _chain(rule)
    return {claim.claim_id: _chain_diagram(claim, rule, chain) for claim in report.claims}


def _chain_diagram(claim: ClaimVerdict, rule: str, chain: MarkovChain | None) -> ChainDiagram | None:
    """The visited states in order (S0 -> S2 -> S1 ...), with each agent's verdict and why the chain moved."""
    if claim.debate is None or not claim.debate.states:
        return None
    states: list[StateRecord] = claim.debate.states
    drawn: list[DiagramState] = []
    for index, state in enumerate(states):
        turns = [
            DiagramTurn(t.role, _verdict(t), t.error_severity, t.opinion or t.error or "", t.call.prompt)
            for t in state.turns
        ]
        drawn.append(DiagramState(state.name, state.round, state.consensus, turns, x=10 + index * (_BOX_W + _GAP)))
    for here, why in zip(drawn, explain_moves(claim.debate, chain), strict=True):
        if why is not None:
            here.why_next = why
    tallest = max(len(s.turns) for s in drawn)
    return ChainDiagram(
        rule=rule,
        states=drawn,
        stop_reason=claim.debate.stop_reason,
        width=20 + len(drawn) * (_BOX_W + _GAP) - _GAP,
        height=60 + tallest * _LINE_H + 20,
        box_width=_BOX_W,
        gap=_GAP,
    )


def agreement_png(points: list[AgreementPoint]) -> bytes:
    """Agreement and kappa per period as a PNG (matplotlib). A PNG, not inline SVG: matplotlib's SVG styles itself
    with inline style attributes, which the desk's Content-Security-Policy refuses. Drawing takes 100-300 ms of
    CPU, so the same points give the PNG drawn before (it changes only when a review is added)."""
    return _drawn(tuple(points))


@functools.lru_cache(maxsize=32)
def reliability_png(bins: tuple[tuple[float, float, int], ...]) -> bytes:
    """The reliability diagram of p_factual on reviewed claims (per bin: mean p_factual, share reviewed factual,
    claims) as a PNG, beside the diagonal of a perfect calibration."""
    from matplotlib.figure import Figure  # the pyplot-free API: safe in a server's worker threads

    figure = Figure(figsize=(4, 4), dpi=100)
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfectly calibrated")
    if bins:
        axes.plot([b[0] for b in bins], [b[1] for b in bins], marker="o", color="#1f5fbf", label="reviewed claims")
        for mean_p, share, claims in bins:
            axes.annotate(f"n={claims}", (mean_p, share), textcoords="offset points", xytext=(4, -10), fontsize=7)
    else:
        axes.text(0.5, 0.5, "no reviewed claim has a p_factual", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("mean p_factual (10 bins)")
    axes.set_ylabel("share reviewed factual")
    axes.legend(loc="upper left", fontsize=7)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


@functools.lru_cache(maxsize=32)
def _drawn(points: tuple[AgreementPoint, ...]) -> bytes:
    from matplotlib.figure import Figure  # the pyplot-free API: safe in a server's worker threads

    figure = Figure(figsize=(7, 2.8), dpi=100)
    axes = figure.add_subplot()
    periods = [p.period for p in points]
    axes.plot(periods, [p.agreement for p in points], marker="o", color="#1f5fbf", label="agreement")
    kappas = [(p.period, p.kappa) for p in points if p.kappa is not None]
    if kappas:
        axes.plot(
            [k for k, _ in kappas],
            [v for _, v in kappas],
            marker="s",
            linestyle="--",
            color="#8a3b00",
            label="Cohen's kappa",
        )
    for period, point in zip(periods, points, strict=True):
        axes.annotate(
            f"n={point.reviews}",
            (period, point.agreement),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=7,
        )
    if not points:
        axes.text(0.5, 0.5, "no reviews yet", ha="center", va="center", transform=axes.transAxes)
    # Padded below the lowest value (kappa can be negative), so a point at 0 is drawn whole, not cut by the axis.
    axes.set_ylim(min([0.0, *(v for _, v in kappas)]) - 0.08, 1.1)
    axes.margins(x=0.15)
    axes.set_ylabel("reviewers vs engine")
    axes.legend(loc="lower left", fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
