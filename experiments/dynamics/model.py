"""The fitted role model, in arrays: the observations indexed once, so a bootstrap replicate (items drawn with
replacement) or a latent class (items weighted by their responsibilities) is a vector of item weights, and its
behaviour is a few `bincount`s rather than a pass over every turn.

`Behaviour` answers P(verdict true | role, state, label, shown) with a stated back-off for contexts never seen: the
same role, label and shown verdicts in any state, then the last shown verdict alone, then the role and label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from debate.engine import RoleTables
from experiments.dynamics.observe import Observation

__all__ = ["Behaviour", "Context", "Indexed", "Mixture", "interval", "multiplicities"]

Context = tuple[str, str, bool, tuple[bool, ...]]
"""(role, state, true label, verdicts shown)."""

Floats = NDArray[np.float64]


def describe(context: Context) -> str:
    role, state, label, shown = context
    return f"{role} in {state}, label {label}, shown {list(shown)}"


@dataclass
class Behaviour(RoleTables):
    """P(verdict true) per context from (weighted) counts (debate.engine.RoleTables), with the contexts set from
    outside and those answered by back-off."""

    overrides: dict[Context, float] = field(default_factory=dict)
    """Contexts whose value is set from outside (the back-off sensitivity)."""
    backed_off: dict[Context, float] = field(default_factory=dict)
    """Contexts answered by back-off since the last `clear`, with the value given."""

    def clear(self) -> None:
        self.backed_off = {}

    def seen(self, context: Context) -> bool:
        return self.tables[0].get(context, (0.0, 0.0))[1] > 0

    def p(self, role: str, state: str, label: bool, shown: tuple[bool, ...]) -> float:
        context = (role, state, label, shown)
        if context in self.overrides:
            return self.overrides[context]
        value, depth = self.lookup(role, state, label, shown)
        if depth:
            self.backed_off[context] = value
        return value

    def forced(self, context: Context, value: float) -> Behaviour:
        return Behaviour(self.tables, self.pseudo, overrides={**self.overrides, context: value})


def interval(values: Sequence[float]) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap values."""
    low, high = np.percentile(np.asarray(values, dtype=float), [2.5, 97.5])
    return float(low), float(high)


def multiplicities(items: int, n: int, seed: int) -> list[Floats]:
    """`n` bootstrap replicates as item multiplicities (items drawn with replacement)."""
    rng = np.random.default_rng(seed)
    return [np.bincount(rng.integers(0, items, items), minlength=items).astype(np.float64) for _ in range(n)]


class Indexed:
    """The observations indexed by item and by context at each back-off level, with each item's weight.

    Weights live here and nowhere else: an item's weight is its base weight (a pseudo-item of an unlabelled claim
    counts P(its label | the claim's turns); a labelled item 1) times an optional `scale` per item (a bootstrap
    replicate's multiplicities, a class's responsibilities). Every aggregate (the tables, the calibration file's
    counts, the factual share, calls per turn, a role's figures) is a tally through `weights`, so none can forget
    the base weights (as scikit-learn's `sample_weight`): weight k counts as k copies, weight 0 as no item."""

    def __init__(
        self,
        seen: Sequence[Observation],
        *,
        weights: Mapping[str, float] | None = None,
        origin: Mapping[str, str] | None = None,
    ) -> None:
        """`weights`: each item's base weight (a pseudo-item of an unlabelled claim counts its label's probability);
        `origin`: the claim each item came from (a bootstrap draws claims, not pseudo-items)."""
        self.observations = list(seen)
        self.items: list[str] = list(dict.fromkeys(o.item for o in seen))
        self.base = np.array([1.0 if weights is None else weights[item] for item in self.items], dtype=np.float64)
        if np.any(self.base < 0) or not np.all(np.isfinite(self.base)):
            raise ValueError("an item's weight must be finite and 0 or more")
        claims = [item if origin is None else origin[item] for item in self.items]
        self.claims: list[str] = list(dict.fromkeys(claims))
        where_claim = {claim: i for i, claim in enumerate(self.claims)}
        self.claim_of = np.array([where_claim[c] for c in claims], dtype=np.int64)
        where = {item: i for i, item in enumerate(self.items)}
        self.item_of = np.array([where[o.item] for o in seen], dtype=np.int64)
        self.verdict = np.array([o.verdict for o in seen], dtype=np.float64)
        self.calls = np.array([o.calls for o in seen], dtype=np.float64)
        labels = {o.item: o.label for o in seen}
        if any(label is None for label in labels.values()):
            raise ValueError("Indexed needs every item labelled: expand an unlabelled run first (clusters.expand)")
        self.label = np.array([labels[item] for item in self.items], dtype=bool)
        ids: dict[Context, int] = {}
        self.index = np.array(
            [ids.setdefault((o.role, o.state, bool(o.label), o.shown), len(ids)) for o in seen], dtype=np.int64
        )
        """Each turn's full context, as a column of `keys` (the back-off levels are summed from these, as the
        calibration file's reader sums them)."""
        self.keys: list[Context] = list(ids)
        shape = (len(self.items), len(self.keys))
        self.true = np.zeros(shape)
        self.turns = np.zeros(shape)
        np.add.at(self.true, (self.item_of, self.index), self.verdict)
        np.add.at(self.turns, (self.item_of, self.index), 1.0)

    def weights(self, scale: Floats | None = None) -> Floats:
        """Each item's weight: its base weight times `scale` (None: 1 for every item)."""
        return self.base if scale is None else np.asarray(self.base * scale, dtype=np.float64)

    def turn_weights(self, scale: Floats | None = None) -> Floats:
        """Each turn's weight: its item's."""
        return self.weights(scale)[self.item_of]

    def tally(self, scale: Floats | None = None) -> tuple[Floats, Floats]:
        """Per full context (`keys`, in order): the weighted "true" verdicts and turns."""
        w = self.turn_weights(scale)
        n = np.bincount(self.index, weights=w, minlength=len(self.keys)).astype(np.float64)
        t = np.bincount(self.index, weights=w * self.verdict, minlength=len(self.keys)).astype(np.float64)
        return t, n

    def factual_share(self, scale: Floats | None = None) -> float:
        """The weighted share of factual items: the prior of the posterior."""
        w = self.weights(scale)
        return float((w * self.label).sum() / max(1e-12, w.sum()))

    def replicate(self, claims: Floats) -> Floats:
        """The item scale of a bootstrap replicate that draws each claim `claims[claim]` times."""
        return np.asarray(claims[self.claim_of], dtype=np.float64)

    def behaviour(self, scale: Floats | None = None, *, pseudo: float = 0.0) -> Behaviour:
        """The behaviour with each item weighted by `weights(scale)`; `pseudo`: the pseudo-counts a calibration
        file's reader adds (debate.calibration.SMOOTHING). Its tables are built as the file's are
        (`RoleTables.from_counts` over the same `counts`), so what a fit scores and what its file scores are one
        model, not two builders that happen to agree."""
        return Behaviour(RoleTables.from_counts(self.counts(scale)).tables, pseudo=pseudo)

    def counts(self, scale: Floats | None = None) -> list[tuple[Context, float, float]]:
        """Each full context's weighted (true verdicts, turns): what `behaviour` sums into its back-off tables, and
        what a calibration file stores."""
        t, n = self.tally(scale)
        return [(k, float(a), float(b)) for k, a, b in zip(self.keys, t, n, strict=True) if b > 0]

    def calls_per_turn(self, scale: Floats | None = None) -> float:
        w = self.turn_weights(scale)
        return float((w * self.calls).sum() / max(1e-12, w.sum()))


@dataclass
class Mixture:
    """Latent classes of items: per class a behaviour, and per true label the share of items in each class."""

    components: list[Behaviour]
    shares: dict[bool, list[float]]
    """Per true label, the share of items in each class."""
    responsibilities: Floats
    """Per item (in `Indexed.items` order), P(class)."""
    loglik: float
    parameters: int
    steps: int = 0
    """EM steps the fit took."""
    converged: bool = True
    """False: EM and the search after it stopped at their cap (experiments.dynamics.em)."""

    @property
    def classes(self) -> int:
        return len(self.components)

    def bic(self, items: int) -> float:
        return -2 * self.loglik + self.parameters * float(np.log(max(2, items)))
