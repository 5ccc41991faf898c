"""The families of role behaviour the latent fit (experiments.dynamics.latent) chooses between.

tables: a free P(verdict true) per cluster (label, class) and context (role, state, verdicts shown): as many
    parameters as there are cells, which 2,000 claims cannot fill for two classes.
pulled: each role either repeats the last verdict it is shown (its pull, one per role, the same in every cluster) or
    decides on its own with its own rate per cluster (role, label, class); a role shown nothing decides. Far fewer
    parameters, and no state: a population whose roles behave by state, or remember, fails the checks of the fitted
    model (experiments.dynamics.diagnostics) as it fails the tables'.

The pulled family's maximum is found by EM over a second latent choice per turn (repeated or decided), nested in
the clusters' EM: each M step takes one of its steps from the current rates, which raises the expected
complete log-likelihood, so the outer EM stays monotone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from experiments.dynamics.model import Floats

__all__ = ["FAMILIES", "Family", "FamilyName", "Pulled", "PulledRates", "Tables", "family_of"]

FamilyName = Literal["tables", "pulled"]
FAMILIES: tuple[FamilyName, ...] = ("tables", "pulled")

_CLIP = 1e-12
_EM_CAP = 1000
"""EM steps before the quasi-Newton search takes over (experiments.dynamics.latent). EM's rate nears 1 where the
turns say little (a share of factual claims, a pull against the classes' own rates: 1e-5 a step after 4,000 steps on
3,000 claims); L-BFGS on the same likelihood and gradient ends there in a few hundred evaluations."""
_INNER_FIRST = 2000
"""Inner EM steps at most when the M step starts from nothing (the outer EM's first step, a fit's final rates): it
stops when no rate moves by more than 1e-12."""
_INNER = 1
"""Inner EM steps from the current rates: one raises the expected complete log-likelihood, which keeps the outer EM
monotone (a generalised EM); more cost as much as the outer steps they save."""


class Family(Protocol):
    """Rates per (label, class, context) from a few parameters, fitted to weighted counts."""

    @property
    def name(self) -> FamilyName: ...

    def parameters(self, classes: int) -> int: ...

    def size(self, classes: int) -> int:
        """The length of the packed parameters (free or not)."""
        ...

    def refit(self, true: Floats, turns: Floats, current: Floats | None) -> Floats:
        """Parameters (packed, unconstrained) from weighted counts (label x class x context), from `current`."""
        ...

    def rates(self, x: Floats, classes: int) -> Floats:
        """label x class x context: P(verdict true)."""
        ...

    def gradient(self, true: Floats, turns: Floats, x: Floats) -> Floats:
        """The log-likelihood's gradient in `x` when the counts are the E step's at `x` (Fisher's identity: the
        expected complete log-likelihood's)."""
        ...

    @property
    def em_cap(self) -> int:
        """EM steps before a quasi-Newton search takes over (experiments.dynamics.latent)."""
        ...


def _logit(p: Floats) -> Floats:
    q = np.clip(p, _CLIP, 1 - _CLIP)
    return np.asarray(np.log(q / (1 - q)), dtype=np.float64)


def _sigmoid(x: Floats) -> Floats:
    return np.asarray(1 / (1 + np.exp(-np.clip(x, -700, 700))), dtype=np.float64)


@dataclass(frozen=True)
class Tables:
    """A free rate per cluster and context (the rates' logits are the parameters)."""

    contexts: int
    name: FamilyName = "tables"

    def parameters(self, classes: int) -> int:
        return 2 * classes * self.contexts

    def size(self, classes: int) -> int:
        return self.parameters(classes)

    def refit(self, true: Floats, turns: Floats, current: Floats | None) -> Floats:
        return _logit(np.divide(true, turns, out=np.full_like(turns, 0.5), where=turns > 0)).ravel()

    def rates(self, x: Floats, classes: int) -> Floats:
        return _sigmoid(x).reshape(2, classes, self.contexts)

    def gradient(self, true: Floats, turns: Floats, x: Floats) -> Floats:
        return np.asarray((true - turns * _sigmoid(x).reshape(true.shape)).ravel(), dtype=np.float64)

    @property
    def em_cap(self) -> int:
        return _EM_CAP


@dataclass(frozen=True)
class PulledRates:
    """The pulled family's fit as counts: per role, label and class the turns it decided on its own and their
    "true" verdicts; per role the turns it was shown a verdict and those it repeated the last one in."""

    roles: tuple[str, ...]
    own_true: Floats
    """role x label x class."""
    own_turns: Floats
    pulled: Floats
    """role: turns that repeated the last verdict shown."""
    shown: Floats
    """role: turns shown a verdict."""


class Pulled:
    """Each role's own rate per cluster and its pull toward the last verdict it is shown (see the module)."""

    name: FamilyName = "pulled"

    def __init__(self, roles: list[str], role_of: list[int], last: list[int]) -> None:
        self.roles = roles
        self.onehot = np.zeros((len(role_of), len(roles)))
        self.onehot[np.arange(len(role_of)), role_of] = 1.0
        self.last = np.asarray(last)
        """Per context: the last verdict shown (1, 0) or -1 for none."""
        self.shown = (self.last >= 0).astype(np.float64)

    def parameters(self, classes: int) -> int:
        pulled_roles = int((self.onehot.T @ self.shown > 0).sum())
        return len(self.roles) * 2 * classes + pulled_roles

    def size(self, classes: int) -> int:
        # every role has a pull slot; one never shown a verdict keeps it at 0 (not a free parameter)
        return len(self.roles) * (2 * classes + 1)

    def _split(self, x: Floats, classes: int) -> tuple[Floats, Floats]:
        own = _sigmoid(x[: len(self.roles) * 2 * classes]).reshape(len(self.roles), 2, classes)
        return own, _sigmoid(x[len(self.roles) * 2 * classes :])

    def _per_context(self, x: Floats, classes: int) -> tuple[Floats, Floats]:
        """Each context's own rate (label x class x context) and pull (context; 0 where nothing is shown)."""
        own, pull = self._split(x, classes)
        return np.einsum("kr,rlc->lck", self.onehot, own), (self.onehot @ pull) * self.shown

    def rates(self, x: Floats, classes: int) -> Floats:
        theta, gamma = self._per_context(x, classes)
        return np.asarray(gamma * np.maximum(self.last, 0) + (1 - gamma) * theta, dtype=np.float64)

    def counts(self, true: Floats, turns: Floats, x: Floats, classes: int) -> PulledRates:
        """One inner EM step's counts: each turn split into repeated and decided at the rates `x`."""
        theta, gamma = self._per_context(x, classes)
        repeats_true = self.last == 1
        # the share of the turns agreeing with the last verdict shown that repeated it
        agree_own = np.where(repeats_true, theta, 1 - theta)
        share = np.divide(gamma, gamma + (1 - gamma) * agree_own, out=np.zeros_like(theta), where=gamma > 0)
        agreeing = np.where(repeats_true, true, turns - true)
        repeated = share * agreeing * self.shown
        decided_true = true - repeated * repeats_true
        decided = turns - repeated
        return PulledRates(
            roles=tuple(self.roles),
            own_true=np.einsum("lck,kr->rlc", decided_true, self.onehot),
            own_turns=np.einsum("lck,kr->rlc", decided, self.onehot),
            pulled=repeated.sum((0, 1)) @ self.onehot,
            shown=(turns * self.shown).sum((0, 1)) @ self.onehot,
        )

    def gradient(self, true: Floats, turns: Floats, x: Floats) -> Floats:
        classes = true.shape[1]
        own, pull = self._split(x, classes)
        c = self.counts(true, turns, x, classes)
        return np.concatenate([(c.own_true - c.own_turns * own).ravel(), c.pulled - c.shown * pull])

    @property
    def em_cap(self) -> int:
        return _EM_CAP

    def refit(self, true: Floats, turns: Floats, current: Floats | None) -> Floats:
        classes = true.shape[1]
        if current is None:
            x = np.concatenate([np.zeros(len(self.roles) * 2 * classes), np.full(len(self.roles), -1.0)])
            steps = _INNER_FIRST
        else:
            x, steps = current, _INNER
        for _ in range(steps):
            before, x = x, self.pack_counts(self.counts(true, turns, x, classes))
            if np.abs(_sigmoid(x) - _sigmoid(before)).max() < 1e-12:
                break
        return x

    @staticmethod
    def pack_counts(c: PulledRates) -> Floats:
        own = np.divide(c.own_true, c.own_turns, out=np.full_like(c.own_turns, 0.5), where=c.own_turns > 0)
        pull = np.divide(c.pulled, c.shown, out=np.zeros_like(c.shown), where=c.shown > 0)
        return np.concatenate([_logit(own).ravel(), _logit(pull)])


def family_of(name: FamilyName, keys: list[tuple[str, str, tuple[bool, ...]]]) -> Family:
    """The family `name` over the contexts `keys` (role, state, verdicts shown), in the fit's context order."""
    if name == "tables":
        return Tables(len(keys))
    roles = sorted({role for role, _, _ in keys})
    return Pulled(roles, [roles.index(role) for role, _, _ in keys], [int(s[-1]) if s else -1 for _, _, s in keys])
