"""What the next turn is worth: the expected fall of the decision's error per unit of cost when a given team speaks
the chain's next turns, under that team's fitted calibration (stop = "voi:P").

The decision's error is min(p, 1 - p) with p the stop's P(factual) (the share interval's worst case where the
file has one). A team's next turn says "true" with its predictive probability: P(label | the debate so far) times,
within its segment, P(class | label, its turns) times the class's rate for the turn's context. Looking `depth`
turns ahead (the team speaking each, the chain's speakers in order, a path ending once the threshold is passed)
gives the expected error after them and their expected cost; a team's worth is the best ratio over depths from 1
to the lookahead, because one turn alone rarely moves the decision when two would. Everything is enumerated: 2^depth
paths at most."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from debate.engine._expectation import shown_in_state
from debate.engine._interval import worst_case
from debate.engine._posterior import (
    ClassLogs,
    PosteriorModel,
    PulledRoles,
    RoleTables,
    SegmentedPosterior,
    TurnContext,
)
from debate.engine._reach import Ends, Position, ends_of, reach_from, read_ends, segment_events
from debate.plugins import Chain

__all__ = [
    "Decision",
    "Spoken",
    "TeamView",
    "TurnPolicy",
    "Worth",
    "context_seen",
    "next_context",
    "position_of",
    "turn_worth",
]


def context_seen(model: PosteriorModel, role: str, state: str, shown: tuple[bool, ...]) -> bool:
    """Whether the calibration's fit saw this context under both labels (some class estimated its rate from
    turns, not from a back-off)."""
    for label in (True, False):
        seen = False
        for component in model.classes:
            if isinstance(component, RoleTables):
                seen = seen or component.lookup(role, state, label, shown)[1] == 0
            elif isinstance(component, PulledRoles):
                seen = seen or (role, label) in component.own
        if not seen:
            return False
    return True


def next_context(chain: Chain, position: Position) -> tuple[str, str, tuple[bool, ...]]:
    """The role, state and shown verdicts of the chain's next turn from `position`."""
    role = chain.roles(position.state)[len(position.seq)]
    return role, position.state, shown_in_state(chain, role, len(position.seq), position.entering, position.seq)


def _advance(chain: Chain, position: Position, verdict: bool) -> Position:
    roles = chain.roles(position.state)
    if len(position.seq) + 1 < len(roles):
        return Position(position.state, position.entering, (*position.seq, verdict), position.round)
    return Position(chain.next_state(position.state, verdict), verdict, (), position.round + 1)


def _p_true(model: PosteriorModel, logs: ClassLogs, turn: tuple[str, str, tuple[bool, ...]], belief: float) -> float:
    """The predictive P(the turn says true): P(label) is the debate's belief; within the segment each class is
    weighted by its share of the label's likelihood."""
    role, state, shown = turn
    total = 0.0
    for label, weight, per_class in ((True, belief, logs[0]), (False, 1 - belief, logs[1])):
        top = max(per_class)
        if top == -math.inf:
            continue
        weights = [math.exp(v - top) for v in per_class]
        norm = math.fsum(weights)
        rate = math.fsum(w * c.p(role, state, label, shown) for w, c in zip(weights, model.classes, strict=True))
        total += weight * rate / norm
    return min(max(total, 0.0), 1.0)


@dataclass(frozen=True)
class Worth:
    """A team's best lookahead from here."""

    ratio: float
    """Expected fall of the decision's error per unit of cost, at the best depth."""
    depth: int
    error_after: float
    """The expected error after that many turns (fewer where a path passes the threshold)."""
    cost: float
    """Their expected cost."""


def turn_worth(
    ends: Ends,
    chain: Chain,
    position: Position,
    base: Sequence[TurnContext],
    *,
    threshold: float,
    max_rounds: int,
    depth: int,
    cost: Callable[[str], float],
) -> Worth | None:
    """The team's worth (see the module) if it speaks the next turns: `ends` read its segment (moved to the
    P(factual) it starts at), whose turns so far are `base`; `cost(role)` is one turn of that role. None: no turn
    is left before the round limit."""
    models = ends_of(ends)
    logs = tuple(m.start_logs() for m in models)
    for turn in base:
        logs = tuple(m.add_log(log, turn) for m, log in zip(models, logs, strict=True))
    now, _ = read_ends(models, logs)
    if now is None or position.round > max_rounds:
        return None
    error_now = min(now, 1 - now)
    # paths: (probability, position, logs, stop value, decided, turns' cost so far)
    paths = [(1.0, position, logs, now, False, 0.0)]
    best: Worth | None = None
    for step in range(1, depth + 1):
        grown = []
        for prob, at, at_logs, value, decided, spent in paths:
            if decided or at.round > max_rounds:
                grown.append((prob, at, at_logs, value, True, spent))
                continue
            context = next_context(chain, at)
            # the predictive reads the first end (one model: itself): the interval's ends differ only in the prior
            p_true = _p_true(models[0], at_logs[0], context, models[0].p_of_logs(at_logs[0]) or value)
            for verdict, p in ((True, p_true), (False, 1 - p_true)):
                if p <= 0:
                    continue
                turn = TurnContext(*context, verdict)
                after = tuple(m.add_log(log, turn) for m, log in zip(models, at_logs, strict=True))
                v, _ = read_ends(models, after)
                v = value if v is None else v
                done = v >= threshold or v <= 1 - threshold
                grown.append((prob * p, _advance(chain, at, verdict), after, v, done, spent + cost(context[0])))
        paths = grown
        error = math.fsum(prob * min(v, 1 - v) for prob, _, _, v, _, _ in paths)
        spent = math.fsum(prob * c for prob, _, _, _, _, c in paths)
        if spent <= 0:
            break
        ratio = (error_now - error) / spent
        if best is None or ratio > best.ratio + 1e-15:
            best = Worth(ratio=ratio, depth=step, error_after=error, cost=spent)
    return best


def position_of(chain: Chain, verdicts: Sequence[bool]) -> Position:
    """The chain's position after a debate that said `verdicts` in order."""
    position = Position(chain.spec.initial, None, (), 0)
    for verdict in verdicts:
        position = _advance(chain, position, verdict)
    return position


@dataclass(frozen=True)
class TeamView:
    """One team as the policy sees it."""

    name: str
    ends: Ends
    """Its calibration's reader at its own prior (one model, or the share interval's two ends)."""
    cost: Callable[[str], float]
    """One turn of a role by this team, in the run's unit."""


@dataclass(frozen=True)
class Decision:
    """What the policy does next: a team speaks the next turn, or the debate stops."""

    team: int | None
    value: float | None
    """The stop's P(factual) now (None: no turn yet)."""
    stop: str | None = None
    """Why it stops: posterior (decided), max_rounds, out_of_reach (no team can pass the threshold from here) or
    unseen (no team's fit saw the next turn's context)."""
    worth: Worth | None = None
    options: tuple[tuple[int, Worth], ...] = ()
    """Every team that could speak, with its worth."""
    passed: tuple[str, ...] = ()
    """Every team that could not, with why."""


Spoken = tuple[int, TurnContext]
"""A turn: the team that spoke it and its context and verdict."""


@dataclass
class TurnPolicy:
    """Chooses the team of each next turn by its worth (see the module); pure, so the run and `--estimate` follow
    the same rule."""

    teams: Sequence[TeamView]
    chain: Chain
    threshold: float
    limit: int
    """The round the debate ends at."""
    depth: int
    reach_cache: dict[tuple[object, ...], str | None] | None = None
    """Where reach is kept between decisions (a run's claims share one); None: computed each time."""

    def _width(self) -> int:
        return max(len(ends_of(t.ends)) for t in self.teams)

    def _end(self, k: int, e: int) -> PosteriorModel:
        models = ends_of(self.teams[k].ends)
        return models[min(e, len(models) - 1)]

    def segments(self, turns: Sequence[Spoken]) -> list[tuple[int, int]]:
        """The runs of turns one team spoke: (team, first turn)."""
        return [(k, i) for i, (k, _) in enumerate(turns) if i == 0 or turns[i - 1][0] != k]

    def read(self, turns: Sequence[Spoken]) -> tuple[float | None, tuple[float, ...] | None]:
        """The stop's P(factual) after `turns`, and each end's (None before any turn)."""
        if not turns:
            return None, None
        segments = self.segments(turns)
        contexts = [c for _, c in turns]
        ps = []
        for e in range(self._width()):
            p = SegmentedPosterior([self._end(k, e) for k, _ in segments], [i for _, i in segments]).p_factual(contexts)
            if p is None:
                return None, None
            ps.append(p)
        value = ps[0] if len(ps) == 1 else worst_case(ps[0], ps[1])
        return value, tuple(ps)

    def reader(
        self, k: int, turns: Sequence[Spoken], handed: tuple[float, ...] | None
    ) -> tuple[Ends, list[TurnContext]]:
        """Team `k`'s reader for the next turn and its segment's turns so far: its own segment continued, or a new
        one from the P(factual) handed over."""
        segments = self.segments(turns)
        width = self._width()
        if segments and segments[-1][0] == k:
            first = segments[-1][1]
            handed_at = self.read(turns[:first])[1] if first else None
            base = [c for _, c in turns[first:]]
        else:
            handed_at, base = handed, []
        models = tuple(self._end(k, e) for e in range(width))
        if handed_at is not None:
            models = tuple(m.at_prior(p) for m, p in zip(models, handed_at, strict=True))
        return (models[0] if width == 1 else (models[0], models[1])), base

    def _out_of_reach(
        self,
        k: int,
        ends: Ends,
        base: Sequence[TurnContext],
        position: Position,
        turns: Sequence[Spoken],
        handed: tuple[float, ...] | None,
    ) -> str | None:
        """Why team `k` cannot pass the threshold from here (None: it can), kept in `reach_cache` by what decides
        it: the team, the P(factual) its run of turns started at, where the chain stands and that run's turns."""
        segments = self.segments(turns)
        start = segments[-1][1] if segments and segments[-1][0] == k else len(turns)
        key = (k, self.read(turns[:start])[1] if start else None, position, segment_events(base))
        if self.reach_cache is not None and key in self.reach_cache:
            return self.reach_cache[key]
        reach = reach_from(
            ends, self.chain, position, base, threshold=self.threshold, max_rounds=self.limit, stop_at_decidable=True
        )
        why = None if reach.decidable(self.threshold) else reach.said(self.threshold)
        if self.reach_cache is not None:
            if len(self.reach_cache) > 100_000:
                self.reach_cache.clear()  # a bound on memory; entries are recomputed as needed
            self.reach_cache[key] = why
        return why

    def decide(self, turns: Sequence[Spoken]) -> Decision:
        """The next turn's team after `turns`, or why the debate stops."""
        value, handed = self.read(turns)
        if value is not None and (value >= self.threshold or value <= 1 - self.threshold):
            return Decision(team=None, value=value, stop="posterior")
        position = position_of(self.chain, [c.verdict for _, c in turns])
        if position.round > self.limit:
            return Decision(team=None, value=value, stop="max_rounds")
        role, state, shown = next_context(self.chain, position)
        options: list[tuple[int, Worth, Ends]] = []
        passed: list[str] = []
        for k, team in enumerate(self.teams):
            if not context_seen(ends_of(team.ends)[0], role, state, shown):
                passed.append(f"{team.name}: its calibration did not see the {role} in {state} shown {list(shown)}")
                continue
            ends, base = self.reader(k, turns, handed)
            why = self._out_of_reach(k, ends, base, position, turns, handed)
            if why is not None:
                passed.append(f"{team.name}: {why} in the rounds left")
                continue
            worth = turn_worth(
                ends,
                self.chain,
                position,
                base,
                threshold=self.threshold,
                max_rounds=self.limit,
                depth=self.depth,
                cost=team.cost,
            )
            if worth is not None:
                options.append((k, worth, ends))
        if not options:
            unseen = bool(passed) and all("did not see" in p for p in passed)
            return Decision(team=None, value=value, stop="unseen" if unseen else "out_of_reach", passed=tuple(passed))
        k, worth, _ = max(options, key=lambda o: (o[1].ratio, -o[1].cost))
        return Decision(
            team=k,
            value=value,
            worth=worth,
            options=tuple((i, w) for i, w, _ in options),
            passed=tuple(passed),
        )
