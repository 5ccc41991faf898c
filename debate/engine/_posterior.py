"""P(the claim is factual | every turn of its debate) under fitted role behaviour, and the exact outcome of a debate
that stops once that probability is decided.

The model is the one `debate dynamics fit` chooses: items fall in latent classes (one class: every item alike); in
a class, each role says "true" with a probability that depends on its state, the claim's true label and the verdicts
it is shown. A debate's turns are then a likelihood per (label, class), and the posterior sums over classes:

    P(factual | turns) = pi_T sum_c s_T[c] L_c(turns | T) / sum over labels l of pi_l sum_c s_l[c] L_c(turns | l)

with pi_T the share of factual claims the calibration was fitted on (pi_F = 1 - pi_T) and s_l[c] the share of items
of label l in class c. Which turns were run depends only on earlier verdicts (under the paper's rule and under the
posterior stop alike), so the stop rule drops out of the posterior. Nothing is sampled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from debate.engine._driver import ChainDriver, TurnRecord
from debate.engine._expectation import Outcome, RoleModel, shown_in_state
from debate.plugins import Chain
from debate.types import DebateResult

__all__ = [
    "BACKOFF_LEVELS",
    "ClassLogs",
    "Counts",
    "GovernedPath",
    "PosteriorModel",
    "PulledRoles",
    "RoleTables",
    "TurnContext",
    "backoff_keys",
    "chain_digest",
    "governed_outcome",
    "governed_paths",
    "governed_result",
    "result_records",
    "turn_contexts",
]

BACKOFF_LEVELS = 4
"""The back-off for a context never seen: the same role, label and shown verdicts in any state, then the last shown
verdict alone, then the role and label; 0.5 when even that is unseen."""

ClassLogs = tuple[tuple[float, ...], tuple[float, ...]]
"""Per label (factual, hallucinated), log P(label, class, turns) for each latent class."""

Counts = dict[tuple[object, ...], tuple[float, float]]
"""Key -> (weighted "true" verdicts, weighted turns)."""


def backoff_keys(role: str, state: str, label: bool, shown: tuple[bool, ...]) -> list[tuple[object, ...]]:
    """The table keys of a context, most specific first."""
    return [(role, state, label, shown), (role, "*", label, shown), (role, "*", label, shown[-1:]), (role, label)]


class TurnContext(NamedTuple):
    """One turn as the posterior reads it."""

    role: str
    state: str
    shown: tuple[bool, ...]
    """The verdicts of the opinions the speaker was shown, in order."""
    verdict: bool


@dataclass
class RoleTables:
    """P(verdict true) per context from weighted counts, one table per back-off level (`BACKOFF_LEVELS`)."""

    tables: list[Counts]
    pseudo: float = 0.0
    """Pseudo-counts added to each side of a context's verdicts (a calibration's `SMOOTHING`), so a context seen a
    few times, all alike, gives a rate short of 0 or 1; 0 reads the counts as they are (the fit's own tables)."""

    @classmethod
    def from_counts(
        cls,
        counts: Iterable[tuple[tuple[str, str, bool, tuple[bool, ...]], float, float]],
        *,
        pseudo: float = 0.0,
    ) -> RoleTables:
        """The tables from each full context's (true verdicts, turns); a level's entry under half a turn of weight
        counts as never seen."""
        sums: list[defaultdict[tuple[object, ...], list[float]]] = [
            defaultdict(lambda: [0.0, 0.0]) for _ in range(BACKOFF_LEVELS)
        ]
        for context, true, n in counts:
            for level, key in enumerate(backoff_keys(*context)):
                sums[level][key][0] += true
                sums[level][key][1] += n
        return cls([{k: (t, n) for k, (t, n) in level.items() if n >= 0.5} for level in sums], pseudo=pseudo)

    def lookup(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> tuple[float, int]:
        """P(verdict true) and the back-off level that gave it (`BACKOFF_LEVELS`: none did, 0.5)."""
        for depth, key in enumerate(backoff_keys(role, state, label, shown)):
            true, n = self.tables[depth].get(key, (0.0, 0.0))
            if n > 0:
                return (true + self.pseudo) / (n + 2 * self.pseudo), depth
        return 0.5, BACKOFF_LEVELS

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        return self.lookup(role, state, label, shown)[0]


@dataclass(frozen=True)
class PulledRoles:
    """A class's behaviour in the pulled family (`debate dynamics fit` may choose it): a role shown verdicts repeats
    the last one with its pull, and otherwise decides with its own rate for the claim's label; the state does not
    matter."""

    own: Mapping[tuple[str, bool], float]
    """(role, label) -> P(true) when it decides on its own."""
    pull: Mapping[str, float]
    """role -> P(repeating the last verdict shown)."""

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        own = self.own.get((role, label), 0.5)
        if not shown:
            return own
        pull = self.pull.get(role, 0.0)
        return pull * float(shown[-1]) + (1 - pull) * own


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


@dataclass(frozen=True, eq=False)
class PosteriorModel:
    """Latent classes of items, each with its role behaviour, their shares per label, and the share of factual
    claims: what `p_factual` is computed from."""

    classes: Sequence[RoleModel]
    shares: Mapping[bool, Sequence[float]]
    """Per true label, the share of items in each class."""
    prior: float
    """P(factual) before any turn: the share of factual claims the model was fitted on."""
    slope: float = 1.0
    """The recalibration of the log-odds by labelled claims (a calibration's `Recalibration`): log-odds out =
    slope x log-odds in + shift. 1 and 0: none."""
    shift: float = 0.0
    """Added to the log-odds after the slope: the recalibration's intercept, plus the odds of `--prior` over the
    fitted share's."""

    def log_joint(self, turns: Sequence[TurnContext]) -> dict[bool, float]:
        """Per label, log P(label, turns) summed over classes."""
        joint = {}
        for label, prior in ((True, self.prior), (False, 1 - self.prior)):
            per_class = []
            for model, share in zip(self.classes, self.shares[label], strict=True):
                log = _log(prior) + _log(share)
                for t in turns:
                    p = model.p(t.role, t.state, label, t.shown)
                    log += _log(p if t.verdict else 1 - p)
                per_class.append(log)
            joint[label] = _logsumexp(per_class)
        return joint

    def start_logs(self) -> ClassLogs:
        """Per label (factual, hallucinated), log P(label, class) for each class before any turn: what `add_log`
        grows turn by turn and `p_of_logs` reads (an enumeration carries these rather than re-reading each path)."""
        factual = tuple(_log(self.prior) + _log(share) for share in self.shares[True])
        return factual, tuple(_log(1 - self.prior) + _log(share) for share in self.shares[False])

    def add_log(self, logs: ClassLogs, turn: TurnContext) -> ClassLogs:
        """`logs` after one more turn."""
        grown = []
        for label, per_class in zip((True, False), logs, strict=True):
            row = []
            for model, log in zip(self.classes, per_class, strict=True):
                p = model.p(turn.role, turn.state, label, turn.shown)
                row.append(log + _log(p if turn.verdict else 1 - p))
            grown.append(tuple(row))
        return grown[0], grown[1]

    def p_of_logs(self, logs: ClassLogs) -> float | None:
        """P(factual) from per-class logs (`start_logs`)."""
        return self._p_of_joint({True: _logsumexp(logs[0]), False: _logsumexp(logs[1])})

    def p_factual(self, turns: Sequence[TurnContext]) -> float | None:
        """P(factual | turns); None when the model gives these turns probability zero under both labels."""
        return self._p_of_joint(self.log_joint(turns))

    def _p_of_joint(self, joint: dict[bool, float]) -> float | None:
        total = _logsumexp([joint[True], joint[False]])
        if total == -math.inf:
            return None
        if self.slope == 1.0 and self.shift == 0.0:
            return math.exp(joint[True] - total)
        if joint[True] == -math.inf or joint[False] == -math.inf:
            return 1.0 if joint[False] == -math.inf else 0.0
        odds = self.slope * (joint[True] - joint[False]) + self.shift
        return 1 / (1 + math.exp(-odds)) if odds > -700 else 0.0

    def p_debate(self, chain: Chain, records: Sequence[TurnRecord]) -> float | None:
        """P(factual | a debate's turns); None when a turn has no verdict (a failure) or the model gives the turns
        probability zero."""
        contexts = turn_contexts(chain, records)
        return self.p_factual(contexts) if records and len(contexts) == len(records) else None

    def at_prior(self, p: float) -> PosteriorModel:
        """This model for a claim whose P(factual) before its turns is `p` (not the fitted share): the odds scale
        as `--debate.prior` scales them."""
        p = min(max(p, 1e-12), 1 - 1e-12)
        delta = math.log(p / (1 - p)) - math.log(self.prior / (1 - self.prior))
        return dataclasses.replace(self, shift=self.shift + delta)


class Governor(Protocol):
    """What decides the posterior stop: P(factual | the turns so far)."""

    def p_factual(self, turns: Sequence[TurnContext]) -> float | None: ...

    def p_debate(self, chain: Chain, records: Sequence[TurnRecord]) -> float | None: ...


@dataclasses.dataclass(frozen=True)
class SegmentedPosterior:
    """The cascade's posterior: the turns from `starts[k]` on were spoken by team k and read by its calibration's
    model, starting from the P(factual) the earlier teams' turns left. A later team's turns are taken as evidence
    independent of the earlier teams' given the label (each team's model was fitted on its own transcripts)."""

    models: Sequence[PosteriorModel]
    starts: Sequence[int]
    """Where each team's turns begin (the first 0), in turn order."""

    def p_factual(self, turns: Sequence[TurnContext]) -> float | None:
        p: float | None = None
        for k, model in enumerate(self.models):
            begin = self.starts[k]
            end = self.starts[k + 1] if k + 1 < len(self.starts) else len(turns)
            if k > 0 and begin >= len(turns):
                break
            if k > 0:
                if p is None:
                    return None
                model = model.at_prior(p)
            p = model.p_factual(turns[begin:end])
        return p

    def p_debate(self, chain: Chain, records: Sequence[TurnRecord]) -> float | None:
        contexts = turn_contexts(chain, records)
        return self.p_factual(contexts) if records and len(contexts) == len(records) else None


def result_records(result: DebateResult, chain: Chain | None = None) -> list[TurnRecord]:
    """A debate's turns as the chain driver's records. `chain`: a state the debate stopped in before its last
    speaker (a posterior stop, a hand-over) is not taken as finished; without it, each state's last turn is."""
    records = []
    for state in result.states:
        for position, turn in enumerate(state.turns):
            size = len(chain.roles(state.name)) if chain is not None else len(state.turns)
            last = position == size - 1
            records.append(
                TurnRecord(state=state.name, round=state.round, position=position, last_in_state=last, turn=turn)
            )
    return records


def turn_contexts(chain: Chain, records: Sequence[TurnRecord]) -> list[TurnContext]:
    """Each turn with the verdicts its speaker was shown (recomputed by the chain's own driver), up to the first turn
    without a true/false verdict (a failure, or not-enough-evidence, which the model has no rate for)."""
    driver, contexts = ChainDriver(chain), []
    for i, record in enumerate(records):
        verdict = record.turn.factuality
        if verdict is None:
            break
        plan = driver.next_turn(records[:i])
        contexts.append(
            TurnContext(record.turn.role, record.state, tuple(p.opinion.factuality for p in plan.previous), verdict)
        )
    return contexts


def chain_digest(chain: Chain) -> str:
    """sha256 of what a chain does (states, speakers, transitions, what each role is shown), not of its name: a
    calibration holds for every chain with this digest."""
    structure = chain.to_dict()
    structure.pop("name")
    structure["sees"] = {role: chain.spec.role(role).sees for role in chain.spec.all_roles()}
    return hashlib.sha256(json.dumps(structure, sort_keys=True).encode()).hexdigest()


# --- the posterior stop, exactly ----------------------------------------------------------------------------------

Event = tuple[str, str, tuple[bool, ...], bool]
"""(role, state, shown, verdict): a turn's context and what it said."""


@dataclass(frozen=True)
class GovernedPath:
    """Debates that end alike under the posterior stop: the same turns in some order (so the same probability under
    any role model), `count` of them."""

    events: tuple[tuple[Event, int], ...]
    """Each (context, verdict) and how often it occurs."""
    count: int
    verdict: bool
    """The posterior's side when it stopped."""
    turns: int
    capped: bool
    """The round limit, not the threshold, ended it."""

    def probability(self, model: RoleModel, label: bool) -> float:
        log = math.log(self.count)
        for (role, state, shown, verdict), n in self.events:
            p = model.p(role, state, label, shown)
            log += n * _log(p if verdict else 1 - p)
        return math.exp(log)


def _side(p: float | None, last: bool) -> bool:
    return last if p is None or p == 0.5 else p > 0.5


def governed_paths(governor: PosteriorModel, chain: Chain, *, threshold: float, max_rounds: int) -> list[GovernedPath]:
    """Every way a debate under the posterior stop can end, with the turns that lead there grouped by their
    multiset (the posterior, and any model's probability, depend on nothing else). After each turn the debate
    ends when P(factual | turns) >= threshold or <= 1 - threshold; else after the state of round `max_rounds`."""
    Key = tuple[str, bool | None, tuple[bool, ...], tuple[tuple[Event, int], ...]]
    frontier: dict[Key, int] = {(chain.spec.initial, None, (), ()): 1}
    ended: dict[tuple[tuple[tuple[Event, int], ...], bool, int, bool], int] = defaultdict(int)
    for round_ in range(max_rounds + 1):
        following: dict[Key, int] = defaultdict(int)
        for _ in range(max(len(chain.roles(s)) for s in chain.spec.states)):
            moved: dict[Key, int] = defaultdict(int)
            for (state, entering, seq, events), count in frontier.items():
                roles = chain.roles(state)
                role = roles[len(seq)]
                shown = shown_in_state(chain, role, len(seq), entering, seq)
                for verdict in (True, False):
                    grown = dict(events)
                    grown[(role, state, shown, verdict)] = grown.get((role, state, shown, verdict), 0) + 1
                    multiset = tuple(sorted(grown.items()))
                    turns = sum(n for _, n in multiset)
                    p = governor.p_factual(
                        [TurnContext(r, s, sh, v) for (r, s, sh, v), n in multiset for _ in range(n)]
                    )
                    decided = p is not None and (p >= threshold or p <= 1 - threshold)
                    state_over = len(seq) + 1 == len(roles)
                    if decided or (state_over and round_ >= max_rounds):
                        ended[(multiset, _side(p, verdict), turns, not decided)] += count
                    elif state_over:
                        following[(chain.next_state(state, verdict), verdict, (), multiset)] += count
                    else:
                        moved[(state, entering, (*seq, verdict), multiset)] += count
            frontier = moved
        frontier = following
    return [
        GovernedPath(events=events, count=count, verdict=verdict, turns=turns, capped=capped)
        for (events, verdict, turns, capped), count in ended.items()
    ]


def governed_outcome(paths: Sequence[GovernedPath], model: RoleModel, *, label: bool) -> Outcome:
    """P(the posterior-stop verdict is true), the expected turns and P(capped), for one true label, when the agents
    behave as `model` says (the paths were found under the governing calibration)."""
    p_true = turns = capped = 0.0
    for path in paths:
        w = path.probability(model, label)
        p_true += w * path.verdict
        turns += w * path.turns
        capped += w * path.capped
    return Outcome(p_true=p_true, turns=turns, capped=capped)


def governed_result(result: DebateResult, p_factual: float | None, threshold: float) -> DebateResult:
    """A debate run under the posterior stop: `stop_reason` "posterior" when p_factual was decided (>= threshold or
    <= 1 - threshold), and the verdict the posterior's side (its latest opinion on that side; an exact tie keeps the
    last speaker's)."""
    if result.final is None or p_factual is None:
        return result
    side = _side(p_factual, result.final.factuality)
    final = result.final
    if final.factuality != side:
        opinions = [t.as_opinion() for state in result.states for t in state.turns]
        agreeing = [o for o in opinions if o is not None and o.factuality == side]
        # every agent said the other side, yet the fitted rates favour this one: the verdict follows the posterior
        final = agreeing[-1] if agreeing else final.model_copy(update={"factuality": side})
    decided = p_factual >= threshold or p_factual <= 1 - threshold
    # undecided, it ran to max_rounds: a last state that happened to agree did not stop it
    reason = "posterior" if decided else ("max_rounds" if result.stop_reason == "consensus" else result.stop_reason)
    return result.model_copy(update={"stop_reason": reason, "final": final})
