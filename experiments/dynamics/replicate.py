"""Runs of a fitted model itself: what the checks of the model's assumptions compare a real run with.

Each item keeps its place in the real run (its run, and its label when it has one); its class, and its label when it
has none, are drawn from the fitted shares and prior; every debate is then played out turn by turn under the run's
own chain, rounds and stop rule (the paper's consensus, or the posterior stop with the run's calibration), each turn
drawn from the fitted behaviour in its context. Many runs are played at once, in arrays, so a few hundred cost about
a second. What comes out of each run is its table of cells (`Cells`), the same table `cells_of` makes of a real one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from debate.engine import PosteriorModel, shown_in_state
from debate.plugins import Chain
from experiments.dynamics.observe import Observation, RunObservations
from experiments.dynamics.readers import stop_calibration

__all__ = ["Cell", "Cells", "Design", "cells_of", "design_of", "replicate_cells"]

Cell = tuple[str, str, bool | None, tuple[bool, ...], bool | None, bool | None]
"""(role, state, true label (None: not known), verdicts shown, the verdict before them, the initial verdict when it
lies outside both): everything a check of the assumptions conditions on."""

Cells = dict[Cell, tuple[float, float]]
"""Cell -> (true verdicts, turns)."""

Ints = NDArray[np.int64]

_NONE = 2
"""The code of "no such verdict" (and of "label not known") beside 0 (false) and 1 (true)."""


def cells_of(seen: Sequence[Observation]) -> Cells:
    """A run's turns as a table of cells."""
    table: dict[Cell, list[float]] = {}
    for o in seen:
        entry = table.setdefault((o.role, o.state, o.label, o.shown, o.earlier, o.initial), [0.0, 0.0])
        entry[0] += o.verdict
        entry[1] += 1
    return {k: (t, n) for k, (t, n) in table.items()}


@dataclass(frozen=True)
class Design:
    """How a run's debates were run: what a run of the fitted model repeats."""

    chain: Chain
    min_rounds: int
    max_rounds: int
    items: tuple[str, ...]
    """The run's items (each debated once), as the observations name them."""
    threshold: float | None = None
    """The posterior stop's threshold (None: the paper's consensus rule)."""
    governor: PosteriorModel | None = None
    """The calibration the posterior stop decided with."""


def design_of(run: RunObservations) -> Design:
    """A run folder's design: its chain, rounds and stop rule (under the posterior stop, the calibration it ran
    with), and its debated items."""
    from debate.engine import load_chain

    threshold, governor = run.debate.threshold, stop_calibration(run)
    items = tuple(dict.fromkeys(o.item for o in run.observations))
    return Design(
        load_chain(run.debate.chain),
        run.min_rounds,
        run.max_rounds,
        items,
        threshold=threshold if governor is not None else None,
        governor=governor,
    )


class _Slots:
    """Every place a turn can take in the chain: (state, position, the verdict the state was entered with, the
    state's verdicts so far) -> the speaker, what it is shown, and P(true) per label and class."""

    def __init__(self, chain: Chain, model: PosteriorModel, governor: PosteriorModel | None) -> None:
        self.states = list(chain.spec.states)
        where = {s: i for i, s in enumerate(self.states)}
        self.width = max(len(chain.roles(s)) for s in self.states)
        self.speakers = np.array([len(chain.roles(s)) for s in self.states], dtype=np.int64)
        self.following = np.array(
            [[where[chain.next_state(s, False)], where[chain.next_state(s, True)]] for s in self.states],
            dtype=np.int64,
        )
        self.initial = where[chain.spec.initial]
        self.index = np.full((len(self.states), self.width, 3, 1 << self.width), -1, dtype=np.int64)
        self.contexts: list[tuple[str, str, tuple[bool, ...]]] = []
        context_id: dict[tuple[str, str, tuple[bool, ...]], int] = {}
        slot_context: list[int] = []
        slot_shown: list[int] = []
        p: list[list[list[float]]] = []
        g: list[list[list[float]]] = []
        for s, state in enumerate(self.states):
            for position, role in enumerate(chain.roles(state)):
                for entering in (False, True, None):
                    for bits in range(1 << position):
                        seq = tuple(bool(bits >> j & 1) for j in range(position))
                        shown = shown_in_state(chain, role, position, entering, seq)
                        key = (role, state, shown)
                        self.index[s, position, _NONE if entering is None else int(entering), bits] = len(slot_context)
                        slot_context.append(context_id.setdefault(key, len(context_id)))
                        slot_shown.append(len(shown))
                        p.append([[m.p(role, state, label, shown) for m in model.classes] for label in (False, True)])
                        if governor is not None:
                            g.append(
                                [[m.p(role, state, label, shown) for m in governor.classes] for label in (False, True)]
                            )
        self.contexts = list(context_id)
        self.context = np.array(slot_context, dtype=np.int64)
        self.shown = np.array(slot_shown, dtype=np.int64)
        self.p = np.array(p, dtype=np.float64)  # slot x label x class
        self.governor = np.array(g, dtype=np.float64) if governor is not None else None


def _rates(model: PosteriorModel, role: str, state: str, shown: tuple[bool, ...]) -> list[list[float]]:
    """P(true) per label and class."""
    return [[m.p(role, state, label, shown) for m in model.classes] for label in (False, True)]


def _log(x: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(x), dtype=np.float64)


def _posterior(log_joint: NDArray[np.float64], governor: PosteriorModel) -> NDArray[np.float64]:
    """P(factual) per debate from its per-(label, class) log likelihoods (NaN where both labels are impossible)."""
    per_label = []
    for label, prior in ((0, 1 - governor.prior), (1, governor.prior)):
        shares = np.asarray(governor.shares[bool(label)], dtype=np.float64)
        terms = log_joint[:, label, :] + _log(shares)[None, :] + math.log(prior)
        top = terms.max(1)
        safe = np.where(np.isfinite(top), top, 0.0)
        per_label.append(safe + _log(np.exp(terms - safe[:, None]).sum(1)))
    false, true = per_label
    with np.errstate(invalid="ignore", over="ignore"):
        odds = governor.slope * (true - false) + governor.shift
        return np.asarray(1.0 / (1.0 + np.exp(-odds)), dtype=np.float64)


class _Debates:
    """Where each of `d` debates is: its state, the speaker's position in it, the verdict it was entered with, the
    state's verdicts so far (bits), its round, its turns so far and their verdicts, and (under the posterior stop)
    its log likelihood per label and class under the governor."""

    def __init__(self, d: int, slots: _Slots, design: Design) -> None:
        self.history = np.full((d, slots.width * (design.max_rounds + 1)), _NONE, dtype=np.int64)
        self.state = np.full(d, slots.initial, dtype=np.int64)
        self.position = np.zeros(d, dtype=np.int64)
        self.entering = np.full(d, _NONE, dtype=np.int64)
        self.bits = np.zeros(d, dtype=np.int64)
        self.round = np.zeros(d, dtype=np.int64)
        self.spoken = np.zeros(d, dtype=np.int64)
        self.log_joint = np.zeros((d, 2, slots.governor.shape[2] if slots.governor is not None else 1))

    def said(self, a: Ints, verdict: Ints) -> None:
        self.history[a, self.spoken[a]] = verdict
        self.spoken[a] += 1
        self.bits[a] |= verdict << self.position[a]
        self.position[a] += 1

    def decided(self, a: Ints, slot: Ints, verdict: Ints, slots: _Slots, design: Design) -> NDArray[np.bool_]:
        """Under the posterior stop: which debates the governor's p_factual has now decided."""
        assert slots.governor is not None and design.governor is not None and design.threshold is not None
        p = slots.governor[slot]  # turn x label x class
        self.log_joint[a] += _log(np.where(verdict[:, None, None].astype(bool), p, 1 - p))
        posterior = _posterior(self.log_joint[a], design.governor)
        return np.asarray((posterior >= design.threshold) | (posterior <= 1 - design.threshold))

    def end_states(self, o: Ints, last: Ints, slots: _Slots, design: Design, governed: bool) -> NDArray[np.bool_]:
        """Debates `o` whose state just ended on verdict `last`: which stop (the cap; unless governed, agreement
        from min_rounds), the others moving to the next state."""
        agreed = (self.bits[o] == 0) | (self.bits[o] == (1 << self.position[o]) - 1)
        stop = self.round[o] >= design.max_rounds
        if not governed:
            stop |= (self.round[o] >= design.min_rounds) & agreed
        moving, entered = o[~stop], last[~stop]
        self.state[moving] = slots.following[self.state[moving], entered]
        self.entering[moving] = entered
        self.position[moving] = 0
        self.bits[moving] = 0
        self.round[moving] += 1
        return np.asarray(stop)


def _play(
    design: Design,
    slots: _Slots,
    label: Ints,
    klass: Ints,
    code: Ints,
    replicate: Ints,
    runs: int,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every debate of `runs` runs at once; per run, (true verdicts, turns) per (context, label code, earlier code,
    initial code) cell."""
    cells = len(slots.contexts) * 27
    true = np.zeros(runs * cells)
    turns = np.zeros(runs * cells)
    debates = _Debates(len(label), slots, design)
    governed = design.threshold is not None and design.governor is not None and slots.governor is not None
    active = np.arange(len(label))
    while active.size:
        a = active
        slot = slots.index[debates.state[a], debates.position[a], debates.entering[a], debates.bits[a]]
        verdict = (rng.random(a.size) < slots.p[slot, label[a], klass[a]]).astype(np.int64)
        k = slots.shown[slot]
        before = debates.spoken[a] - k - 1
        earlier = np.where((k > 0) & (before >= 0), debates.history[a, np.maximum(before, 0)], _NONE)
        initial = np.where((k > 0) & (before > 0), debates.history[a, 0], _NONE)
        flat = replicate[a] * cells + ((slots.context[slot] * 3 + code[a]) * 3 + earlier) * 3 + initial
        turns += np.bincount(flat, minlength=runs * cells)
        true += np.bincount(flat, weights=verdict.astype(np.float64), minlength=runs * cells)
        debates.said(a, verdict)
        done = debates.decided(a, slot, verdict, slots, design) if governed else np.zeros(a.size, dtype=bool)
        over = ~done & (debates.position[a] == slots.speakers[debates.state[a]])
        if over.any():
            done[over] = debates.end_states(a[over], verdict[over], slots, design, governed)
        active = a[~done]
    return true.reshape(runs, cells), turns.reshape(runs, cells)


def replicate_cells(
    model: PosteriorModel,
    designs: Sequence[Design],
    labels: Mapping[str, bool | None],
    *,
    runs: int,
    seed: int = 0,
    chunk: int = 100,
) -> Iterator[Cells]:
    """`runs` runs of `model` over the real runs' designs, each as its table of cells. `labels`: each item's known
    label (None: not known, drawn from the model's prior, and its cells' label is None as in the real run's)."""
    rng = np.random.default_rng(seed)
    items = list(dict.fromkeys(item for design in designs for item in design.items))
    where = {item: i for i, item in enumerate(items)}
    known = np.array([_NONE if labels[i] is None else int(bool(labels[i])) for i in items], dtype=np.int64)
    shares = [np.asarray(model.shares[label], dtype=np.float64) for label in (False, True)]
    slot_tables = [_Slots(design.chain, model, design.governor) for design in designs]
    done = 0
    while done < runs:
        n = min(chunk, runs - done)
        drawn = np.where(known == _NONE, (rng.random((n, len(items))) < model.prior).astype(np.int64), known)
        klass = np.zeros((n, len(items)), dtype=np.int64)
        for label in (0, 1):
            cumulative = np.cumsum(shares[label] / shares[label].sum())
            picked = np.searchsorted(cumulative, rng.random((n, len(items))), side="right")
            klass = np.where(drawn == label, np.minimum(picked, len(cumulative) - 1), klass)
        tables: list[dict[Cell, list[float]]] = [{} for _ in range(n)]
        for design, slots in zip(designs, slot_tables, strict=True):
            mine = np.array([where[i] for i in design.items], dtype=np.int64)
            replicate = np.repeat(np.arange(n), mine.size)
            columns = np.tile(mine, n)
            true, turns = _play(
                design,
                slots,
                drawn[replicate, columns],
                klass[replicate, columns],
                np.tile(known[mine], n),
                replicate,
                n,
                rng,
            )
            for r, c in zip(*np.nonzero(turns), strict=True):
                context, rest = divmod(int(c), 27)
                code, rest = divmod(rest, 9)
                earlier, initial = divmod(rest, 3)
                role, state, shown = slots.contexts[context]
                key: Cell = (role, state, _decode(code), shown, _decode(earlier), _decode(initial))
                entry = tables[r].setdefault(key, [0.0, 0.0])
                entry[0] += float(true[r, c])
                entry[1] += float(turns[r, c])
        yield from ({k: (t, m) for k, (t, m) in table.items()} for table in tables)
        done += n


def _decode(code: int) -> bool | None:
    return None if code == _NONE else bool(code)
