"""What the clusters of a latent fit (experiments.dynamics.latent) hold: the classes no labelled claim reaches, the
claims that would reach them first, and the run as weighted labelled pseudo-items for the rest of the dynamics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from experiments.dynamics.latent import LatentFit
from experiments.dynamics.observe import Observation

__all__ = ["MIN_REACHED", "expand", "typical", "unreached", "unreached_clusters"]

MIN_REACHED = 1.0
"""Labelled claims (summed responsibilities) a cluster needs for its labels to orient it."""


def unreached_clusters(fit: LatentFit, least_share: float = 0.02) -> list[tuple[int, int]]:
    """The clusters (label, class) holding at least `least_share` of their label's claims that no labelled claim
    reaches: their orientation is the assumption's (none when there is no labelled claim at all)."""
    if fit.labelled is None or fit.labelled.sum() < MIN_REACHED:
        return []
    return [
        (label, c)
        for label in (1, 0)
        for c, share in enumerate(fit.shares[bool(label)])
        if share >= least_share and fit.labelled[label, c] < MIN_REACHED
    ]


def unreached(fit: LatentFit, least_share: float = 0.02) -> list[str]:
    """`unreached_clusters`, each in words."""
    return [
        f"{'factual' if label else 'hallucinated'} class {c + 1} of {fit.classes} "
        f"(share {fit.shares[bool(label)][c]:.2f})"
        for label, c in unreached_clusters(fit, least_share)
    ]


def typical(fit: LatentFit, clusters: list[tuple[int, int]], each: int, unlabelled: set[str]) -> list[str]:
    """Per cluster, the `each` unlabelled claims most surely in it (the labels that would reach it first)."""
    out: list[str] = []
    for label, c in clusters:
        order = np.argsort(-fit.responsibilities[:, label, c], kind="stable")
        mine = [fit.items[i] for i in order if fit.items[i] in unlabelled and fit.items[i] not in out]
        out += mine[:each]
    return out


def expand(seen: Sequence[Observation], fit: LatentFit) -> tuple[list[Observation], dict[str, float], dict[str, str]]:
    """The run as labelled pseudo-items: each item twice, as factual and as hallucinated (`item#factual`,
    `item#hallucinated`), each copy weighted by P(that label | its turns) under the fit. Returns the observations,
    each pseudo-item's weight and the item it came from."""
    where = {item: i for i, item in enumerate(fit.items)}
    weight: dict[str, float] = {}
    origin: dict[str, str] = {}
    out: list[Observation] = []
    for o in seen:
        factual = float(fit.responsibilities[where[o.item], 1].sum())
        for label, w in ((True, factual), (False, 1.0 - factual)):
            if w <= 1e-9:
                continue
            name = f"{o.item}#{'factual' if label else 'hallucinated'}"
            weight[name], origin[name] = w, o.item
            out.append(replace(o, item=name, label=label))
    return out, weight, origin
