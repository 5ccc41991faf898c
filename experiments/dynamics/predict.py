"""Prediction of a chain's accuracy and calls under fitted role behaviour, with bootstrap intervals; the exact
expectation itself (no Monte Carlo) is debate.engine._expectation's, shared with `debate verify --estimate`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from pydantic import BaseModel, ConfigDict

from debate.engine import (
    GovernedPath,
    MarkovChain,
    Outcome,
    PosteriorModel,
    RoleModel,
    governed_paths,
    load_chain,
    outcome,
)
from experiments.dynamics.fitted import FittedModel, ModelKind
from experiments.dynamics.fitting import fit_model
from experiments.dynamics.model import Context, Mixture, describe, interval
from experiments.dynamics.observe import Observation

__all__ = ["Outcome", "Predicted", "RoleModel", "SelfCheck", "Setting", "outcome", "predict", "self_check"]


@dataclass(frozen=True)
class Setting:
    chain: str
    min_rounds: int
    max_rounds: int
    stop: float | None = None
    """The posterior stop's threshold (None: the paper's rule)."""
    governor: PosteriorModel | None = field(default=None, compare=False)
    """The model the posterior stop decides with (None: the fit's own point model, as `fit --save` writes it)."""

    def __str__(self) -> str:
        if self.stop is not None:
            return f"{self.chain} posterior:{self.stop:g} max {self.max_rounds}"
        return f"{self.chain} min {self.min_rounds} max {self.max_rounds}"


class Predicted(BaseModel):
    """One setting's predicted figures, with bootstrap intervals."""

    model_config = ConfigDict(frozen=True)
    chain: str
    min_rounds: int
    max_rounds: int
    stop: str = "consensus"
    """consensus (the paper's rule) or posterior:P."""
    p_true_if_factual: float
    p_true_if_hallucinated: float
    accuracy: float
    accuracy_interval: tuple[float, float]
    f1: float
    f1_interval: tuple[float, float]
    calls_per_claim: float
    calls_interval: tuple[float, float]
    capped: float
    """The share of debates the max-rounds cap stops before the agents agree: where it is large, the figures show
    the cap, not the agents."""
    backed_off: list[str]
    """Contexts this setting needs that the fitted run never showed (answered by the stated back-off)."""
    backoff_range: tuple[float, float] | None
    """The accuracy with every backed-off context at the end of its interval that lowers it, and at the end that
    raises it (None: no back-off)."""


class SelfCheck(BaseModel):
    """The fitted setting predicted from its own fit, against what the run observed."""

    model_config = ConfigDict(frozen=True)
    predicted: Predicted
    observed_accuracy: float
    observed_calls: float
    holds_accuracy: bool
    holds_calls: bool


def self_check(predicted: Predicted, accuracy: float, calls: float) -> SelfCheck:
    low, high = predicted.accuracy_interval
    calls_low, calls_high = predicted.calls_interval
    return SelfCheck(
        predicted=predicted,
        observed_accuracy=accuracy,
        observed_calls=calls,
        holds_accuracy=low - 1e-9 <= accuracy <= high + 1e-9,
        holds_calls=calls_low - 1e-9 <= calls <= calls_high + 1e-9,
    )


@dataclass(frozen=True)
class _Figures:
    yes: float
    no: float
    accuracy: float
    f1: float
    calls: float
    capped: float


def governor_of(model: FittedModel) -> PosteriorModel:
    """The fit's posterior as the posterior stop decides with it: the saved file's (FittedModel.posterior)."""
    return model.posterior


class _Paths:
    """The posterior stop's ways to end (debate.engine.governed_paths) as arrays: a bootstrap replicate's outcome is
    then one matrix product (debate.engine.governed_outcome is the same sum, one path at a time)."""

    def __init__(self, paths: list[GovernedPath]) -> None:
        events = sorted({event for path in paths for event, _ in path.events})
        where = {event: i for i, event in enumerate(events)}
        self.events = events
        self.counts = np.zeros((len(paths), len(events)))
        for row, path in enumerate(paths):
            for event, n in path.events:
                self.counts[row, where[event]] = n
        self.log_count = np.log([float(p.count) for p in paths])
        self.verdict = np.array([p.verdict for p in paths], dtype=np.float64)
        self.turns = np.array([p.turns for p in paths], dtype=np.float64)
        self.capped = np.array([p.capped for p in paths], dtype=np.float64)

    def outcome(self, component: RoleModel, label: bool) -> Outcome:
        p = np.array([component.p(role, state, label, shown) for role, state, shown, _ in self.events])
        said = np.array([verdict for *_, verdict in self.events])
        with np.errstate(divide="ignore", invalid="ignore"):
            log_p = np.log(np.where(said, p, 1 - p))
            # a zero-probability event a path never takes contributes 0, not 0 * -inf
            w = np.exp(self.log_count + np.where(self.counts > 0, self.counts * log_p, 0.0).sum(axis=1))
        return Outcome(p_true=float(w @ self.verdict), turns=float(w @ self.turns), capped=float(w @ self.capped))


@functools.lru_cache(maxsize=32)
def _paths(governor: PosteriorModel, chain: MarkovChain, threshold: float, max_rounds: int) -> _Paths:
    return _Paths(governed_paths(governor, chain, threshold=threshold, max_rounds=max_rounds))


def _outcome(component: RoleModel, chain: MarkovChain, setting: Setting, label: bool) -> Outcome:
    if setting.stop is None:
        return outcome(component, chain, min_rounds=setting.min_rounds, max_rounds=setting.max_rounds, label=label)
    assert setting.governor is not None  # `_one` fills it in
    return _paths(setting.governor, chain, setting.stop, setting.max_rounds).outcome(component, label)


def _figures(mix: Mixture, chain: MarkovChain, setting: Setting, share_true: float, calls_per_turn: float) -> _Figures:
    by_label = {}
    for label in (True, False):
        outcomes = [_outcome(c, chain, setting, label) for c in mix.components]
        weights = mix.shares[label]
        by_label[label] = [
            sum(w * getattr(o, f) for w, o in zip(weights, outcomes, strict=True))
            for f in ("p_true", "turns", "capped")
        ]
    (yes, yes_turns, yes_capped), (no, no_turns, no_capped) = by_label[True], by_label[False]
    tp, fn = share_true * yes, share_true * (1 - yes)
    fp, tn = (1 - share_true) * no, (1 - share_true) * (1 - no)
    return _Figures(
        yes=yes,
        no=no,
        accuracy=tp + tn,
        f1=2 * tp / (2 * tp + fp + fn) if tp else 0.0,
        calls=(share_true * yes_turns + (1 - share_true) * no_turns) * calls_per_turn,
        capped=share_true * yes_capped + (1 - share_true) * no_capped,
    )


def _backed_off(mix: Mixture) -> dict[tuple[int, Context], float]:
    return {(k, ctx): v for k, c in enumerate(mix.components) for ctx, v in c.backed_off.items()}


def _accuracy(
    model: FittedModel,
    chain: MarkovChain,
    setting: Setting,
    share_true: float,
    values: dict[tuple[int, Context], float],
) -> float:
    components = list(model.point.components)
    for (k, context), value in values.items():
        components[k] = components[k].forced(context, value)
    mixture = replace(model.point, components=components)
    return _figures(mixture, chain, setting, share_true, model.calls_per_turn).accuracy


def _sensitivity(
    model: FittedModel,
    chain: MarkovChain,
    setting: Setting,
    share_true: float,
    point: _Figures,
    samples: dict[tuple[int, Context], list[float]],
) -> tuple[float, float] | None:
    """The accuracy with every backed-off context at the end of its interval that lowers it, and at the end that
    raises it (each context's direction found one at a time, the extremes then computed together)."""
    if not samples:
        return None
    lowest, highest = {}, {}
    for key, values in samples.items():
        ends = interval(values)
        moved = [_accuracy(model, chain, setting, share_true, {key: end}) for end in ends]
        lowest[key], highest[key] = (ends[0], ends[1]) if moved[0] <= moved[1] else (ends[1], ends[0])
    low = _accuracy(model, chain, setting, share_true, lowest)
    high = _accuracy(model, chain, setting, share_true, highest)
    return min(low, point.accuracy), max(high, point.accuracy)


def _one(model: FittedModel, setting: Setting, share_true: float) -> Predicted:
    chain = load_chain(setting.chain)
    if setting.stop is not None and setting.governor is None:
        setting = replace(setting, governor=governor_of(model))
    for c in model.point.components:
        c.clear()
    point = _figures(model.point, chain, setting, share_true, model.calls_per_turn)
    backed = _backed_off(model.point)
    samples: dict[tuple[int, Context], list[float]] = {key: [] for key in backed}
    spread = []
    for mix, per_turn in model.replicates:
        for c in mix.components:
            c.clear()
        spread.append(_figures(mix, chain, setting, share_true, per_turn))
        for key, value in _backed_off(mix).items():
            samples.setdefault(key, []).append(value)
    several = model.point.classes > 1
    ranges = {key: samples[key] or [value] for key, value in backed.items()}
    return Predicted(
        chain=setting.chain,
        min_rounds=setting.min_rounds,
        max_rounds=setting.max_rounds,
        stop="consensus" if setting.stop is None else f"posterior:{setting.stop:g}",
        p_true_if_factual=point.yes,
        p_true_if_hallucinated=point.no,
        accuracy=point.accuracy,
        accuracy_interval=interval([s.accuracy for s in spread] or [point.accuracy]),
        f1=point.f1,
        f1_interval=interval([s.f1 for s in spread] or [point.f1]),
        calls_per_claim=point.calls,
        calls_interval=interval([s.calls for s in spread] or [point.calls]),
        capped=point.capped,
        backed_off=sorted(describe(ctx) + (f" (class {k + 1})" if several else "") for k, ctx in backed),
        backoff_range=_sensitivity(model, chain, setting, share_true, point, ranges),
    )


def predict(
    seen: Sequence[Observation],
    settings: Sequence[Setting],
    *,
    share_true: float,
    bootstrap: int = 200,
    seed: int = 0,
    model: ModelKind = "auto",
    fitted: FittedModel | None = None,
) -> list[Predicted]:
    """Predicted accuracy, F1 (factual as the positive class) and calls per claim for each setting, from the
    behaviour fitted to `seen` (or the given `fitted` model); `share_true` is the share of factual claims the
    figures are for."""
    fitted = fitted or fit_model(seen, model=model, bootstrap=bootstrap, seed=seed)
    return [_one(fitted, setting, share_true) for setting in settings]
