"""What a team's remaining turns can do to P(factual): the range of p_factual it can reach before its rounds run out,
exact over every verdict its agents can give (every path has positive probability under a fitted, smoothed model,
so the range over paths is the range the calibration allows).

A team's turns are read by its calibration from the P(factual) the earlier teams left (`SegmentedPosterior`), and
within one team's segment that probability depends only on the multiset of (context, verdict) events, so paths are
grouped by it as `governed_paths` groups them. A path ends where the stop would end it: once p_factual passes the
threshold on either side, or after the state of the last round."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from debate.engine._driver import TurnRecord
from debate.engine._expectation import shown_in_state
from debate.engine._interval import worst_case
from debate.engine._posterior import ClassLogs, Event, PosteriorModel, TurnContext
from debate.plugins import Chain

__all__ = [
    "Ends",
    "Handover",
    "Position",
    "Reach",
    "TeamReach",
    "cascade_reach",
    "ends_of",
    "position_after",
    "reach_from",
    "read_ends",
    "segment_events",
]


@dataclass(frozen=True)
class Position:
    """Where the chain stands before its next turn."""

    state: str
    entering: bool | None
    """The verdict the state was entered with (None: the initial state)."""
    seq: tuple[bool, ...]
    """The state's verdicts so far."""
    round: int


def position_after(chain: Chain, records: Sequence[TurnRecord]) -> Position:
    """The chain's position after `records` (the chain driver's rule)."""
    if not records:
        return Position(chain.spec.initial, None, (), 0)
    last = records[-1]
    this = [r for r in records if (r.round, r.state) == (last.round, last.state)]
    seq = tuple(bool(r.turn.factuality) for r in this)
    if last.position + 1 < len(chain.roles(last.state)):  # the driver's rule: a state ends with its last speaker
        before = records[: len(records) - len(this)]
        entering = bool(before[-1].turn.factuality) if before else None
        return Position(last.state, entering, seq, last.round)
    verdict = bool(last.turn.factuality)
    return Position(chain.next_state(last.state, verdict), verdict, (), last.round + 1)


def segment_events(contexts: Sequence[TurnContext]) -> tuple[tuple[Event, int], ...]:
    """The multiset of a segment's (context, verdict) events, as the enumeration keys it."""
    counts: dict[Event, int] = defaultdict(int)
    for c in contexts:
        counts[(c.role, c.state, c.shown, c.verdict)] += 1
    return tuple(sorted(counts.items()))


@dataclass(frozen=True)
class Handover:
    """A path the team left undecided when its rounds ran out: where the chain stands and p_factual there."""

    position: Position
    p: tuple[float, ...]
    """p_factual there under each end (one: a model; two: the share interval's lowest and highest)."""
    weight: int
    """How many verdict sequences end here (with this multiset)."""


@dataclass(frozen=True)
class Reach:
    """The range of p_factual a team's remaining turns can reach, and the undecided ends of its paths."""

    low: float
    high: float
    now: float | None
    """p_factual before these turns (None: the model gives them probability zero)."""
    handovers: tuple[Handover, ...] = ()
    exhausted: bool = True
    """Every path was followed (False: the search stopped at the first that decides)."""

    def decidable(self, threshold: float) -> bool:
        """Whether some path takes p_factual to the threshold on either side."""
        return self.high >= threshold or self.low <= 1 - threshold

    def said(self, threshold: float) -> str:
        low, high = shown(self.low, 1 - threshold), shown(self.high, threshold)
        sides = []
        if self.high < threshold:
            sides.append(f"at most {high} < {threshold:g}")
        if self.low > 1 - threshold:
            sides.append(f"at least {low} > {1 - threshold:g}")
        return f"p_factual reaches [{low}, {high}]" + (f" ({'; '.join(sides)})" if sides else "")


def shown(value: float, bound: float) -> str:
    """`value` with 3 decimals, or as many more as it takes not to read as `bound` (0.9989 is not 0.999)."""
    digits = 3
    while digits < 9 and value != bound and float(f"{value:.{digits}f}") == bound:
        digits += 1
    return f"{value:.{digits}f}"


Ends = PosteriorModel | tuple[PosteriorModel, PosteriorModel]
"""What reads a segment: one model, or the share interval's two ends (lowest share, highest), read in the worst
case (debate.engine.worst_case)."""


def ends_of(ends: Ends) -> tuple[PosteriorModel, ...]:
    """The models of `ends`, one or two."""
    return ends if isinstance(ends, tuple) else (ends,)


def read_ends(models: Sequence[PosteriorModel], logs: Sequence[ClassLogs]) -> tuple[float | None, tuple[float, ...]]:
    """The stop's P(factual) from each end's class logs (two: their worst case), and each end's."""
    each = [m.p_of_logs(log) for m, log in zip(models, logs, strict=True)]
    if any(p is None for p in each):
        return None, ()
    ps = tuple(p for p in each if p is not None)
    return (ps[0] if len(ps) == 1 else worst_case(ps[0], ps[1])), ps


Multiset = tuple[tuple[Event, int], ...]
Key = tuple[str, bool | None, tuple[bool, ...], Multiset]
Node = tuple[int, tuple[ClassLogs, ...]]
"""A node's paths, and each end's class logs (they depend on the multiset alone, so merged paths share them)."""


def reach_from(
    ends: Ends,
    chain: Chain,
    start: Position,
    base: Sequence[TurnContext],
    *,
    threshold: float,
    max_rounds: int,
    keep_handovers: bool = False,
    stop_at_decidable: bool = False,
) -> Reach:
    """The range of p_factual over every continuation from `start` of a segment read by `ends` (each at the
    P(factual) the earlier teams left), its turns so far being `base`, until the threshold is passed or the state of
    round `max_rounds` ends (counted over the whole debate). Includes p_factual now. `keep_handovers`: also the
    paths' undecided ends (the next team's starting points). `stop_at_decidable`: return once a path passes the
    threshold (the range is then partial: `exhausted` False)."""
    models = ends_of(ends)
    logs = tuple(m.start_logs() for m in models)
    for turn in base:
        logs = tuple(m.add_log(log, turn) for m, log in zip(models, logs, strict=True))
    now, _ = read_ends(models, logs)
    low = high = now if now is not None else 0.5
    if now is not None and (now >= threshold or now <= 1 - threshold):
        return Reach(low=now, high=now, now=now)
    frontier: dict[Key, Node] = {(start.state, start.entering, start.seq, segment_events(base)): (1, logs)}
    search = _Search(models, chain, threshold, max_rounds, keep_handovers, low, high)
    round_ = start.round
    while frontier and round_ <= max_rounds:
        following: dict[Key, Node] = {}
        while frontier:
            moved: dict[Key, Node] = {}
            for key, node in frontier.items():
                if search.expand(key, node, round_, moved, following) and stop_at_decidable:
                    return Reach(low=search.low, high=search.high, now=now, exhausted=False)
            frontier = moved
        frontier = following
        round_ += 1
    handovers = tuple(Handover(position, ps, n) for (position, _), (n, ps) in search.ends_at.items())
    return Reach(low=search.low, high=search.high, now=now, handovers=handovers)


@dataclass
class _Search:
    """The enumeration's state: the range so far and the undecided ends kept."""

    models: tuple[PosteriorModel, ...]
    chain: Chain
    threshold: float
    max_rounds: int
    keep_handovers: bool
    low: float
    high: float
    ends_at: dict[tuple[Position, Multiset], tuple[int, tuple[float, ...]]] = field(default_factory=dict)

    def expand(self, key: Key, node: Node, round_: int, moved: dict[Key, Node], following: dict[Key, Node]) -> bool:
        """Grow one node by each verdict its next speaker can give: into `moved` within its state, `following`
        past it; True when a path passed the threshold."""
        (state, entering, seq, events), (count, at) = key, node
        roles = self.chain.roles(state)
        role = roles[len(seq)]
        shown = shown_in_state(self.chain, role, len(seq), entering, seq)
        passed = False
        for verdict in (True, False):
            turn = TurnContext(role, state, shown, verdict)
            grown = dict(events)
            grown[turn] = grown.get(turn, 0) + 1
            multiset = tuple(sorted(grown.items()))
            after = tuple(m.add_log(log, turn) for m, log in zip(self.models, at, strict=True))
            p, ps = read_ends(self.models, after)
            if p is None:
                continue  # a path the model gives probability zero
            self.low, self.high = min(self.low, p), max(self.high, p)
            if p >= self.threshold or p <= 1 - self.threshold:
                passed = True
            elif len(seq) + 1 < len(roles):
                _add(moved, (state, entering, (*seq, verdict), multiset), count, after)
            elif round_ < self.max_rounds:
                _add(following, (self.chain.next_state(state, verdict), verdict, (), multiset), count, after)
            elif self.keep_handovers:
                end = (Position(self.chain.next_state(state, verdict), verdict, (), round_ + 1), multiset)
                self.ends_at[end] = (count + self.ends_at.get(end, (0, ps))[0], ps)
        return passed


def _add(nodes: dict[Key, Node], key: Key, count: int, logs: tuple[ClassLogs, ...]) -> None:
    had = nodes.get(key)
    nodes[key] = (count + (had[0] if had else 0), logs)


@dataclass(frozen=True)
class TeamReach:
    """What one team of a cascade can do to the claims it may be handed, found at start."""

    low: float
    high: float
    decidable: bool
    """Some claim it may be handed can be decided by its turns; False: it is skipped."""
    handed: bool
    """Some path reaches it undecided (False: the earlier teams decide every claim)."""
    rounds: int
    """The round its turns end at (counted over the whole debate)."""

    def said(self, name: str, threshold: float) -> str:
        if not self.handed:
            return f"team {name}: never handed a claim (the earlier teams decide every path)"
        if self.decidable:
            return f"team {name}: p_factual reaches [{self.low:.3f}, {self.high:.3f}] by round {self.rounds}"
        return (
            f"team {name} is skipped: by round {self.rounds} its turns take p_factual only to [{self.low:.3f}, "
            f"{self.high:.3f}], never to {threshold:g} or {1 - threshold:g}; it is paid for no turn"
        )


Start = tuple[Position, tuple[float, ...] | None]
"""Where a team may be handed a claim, and the P(factual) it is handed at under each end (None: the first team,
at its prior)."""


def _at(ends: Ends, handed: tuple[float, ...] | None) -> Ends:
    """`ends` moved to the P(factual) handed over (each end to its own)."""
    if handed is None:
        return ends
    models = ends_of(ends)
    moved = tuple(m.at_prior(p) for m, p in zip(models, handed, strict=True))
    return moved[0] if len(moved) == 1 else (moved[0], moved[1])


def cascade_reach(models: Sequence[Ends], chain: Chain, *, threshold: float, rounds: Sequence[int]) -> list[TeamReach]:
    """Each team's reach over the claims it may be handed: the first from the chain's start at its own prior, each
    later one from every undecided end of the team before it (a skipped team hands on what it was handed), its
    model moved to the P(factual) handed over. A team's p_factual rises with the P(factual) it is handed, so from
    each position only the highest and lowest handed values matter for what it can decide: exact for the second
    team; from the third on, the earlier team's ends are followed from those extremes only."""
    if any(isinstance(e, tuple) for e in models):
        # a single model reads like an interval of one share, so each team's ends line up with the handed values
        models = [e if isinstance(e, tuple) else (e, e) for e in models]
    starts: list[Start] = [(Position(chain.spec.initial, None, (), 0), None)]
    found = []
    for ends, limit in zip(models, rounds, strict=True):
        if not starts:
            found.append(TeamReach(low=0.5, high=0.5, decidable=False, handed=False, rounds=limit))
            continue
        reaches = [
            reach_from(_at(ends, p), chain, position, (), threshold=threshold, max_rounds=limit, keep_handovers=True)
            for position, p in starts
        ]
        decidable = any(r.decidable(threshold) for r in reaches)
        found.append(
            TeamReach(
                low=min(r.low for r in reaches),
                high=max(r.high for r in reaches),
                decidable=decidable,
                handed=True,
                rounds=limit,
            )
        )
        if decidable:
            starts = _extremes([h for r in reaches for h in r.handovers])
    return found


def _extremes(handovers: Sequence[Handover]) -> list[Start]:
    """Per position, the ends handed the highest P(factual) at the lowest share and the lowest at the highest
    (one model: its highest and lowest)."""
    by_position: dict[Position, list[tuple[float, ...]]] = defaultdict(list)
    for h in handovers:
        by_position[h.position].append(h.p)
    starts: list[Start] = []
    for position, handed in by_position.items():
        chosen = {max(handed, key=lambda ps: ps[0]), min(handed, key=lambda ps: ps[-1])}
        starts += [(position, ps) for ps in sorted(chosen)]
    return starts
