"""A team's calibration composed from each model's own fit (`debate dynamics fit --team`): its parts, the test
of what it assumes, and that assumption said in a line."""

from __future__ import annotations

from collections.abc import Sequence

from debate.calibration._parts import _Model

__all__ = ["ComposedPart", "Independence", "composed_team", "composition_said"]


class Independence(_Model):
    """The test of a composed calibration's assumption on claims two of its models both debated: are the item
    classes of one model's fit associated with the other's (G test on the responsibility-weighted table)?"""

    models: tuple[str, str]
    claims: int
    """Claims both models debated (in one run: the same debates)."""
    statistic: float
    df: int
    p_value: float
    level: float = 0.01
    rejected: bool
    """The classes are associated at `level`: the models share blind spots, and a composition taking them as
    independent overstates how sure the team is."""


class ComposedPart(_Model):
    """One model's part of a composed calibration (`debate dynamics fit --team`): its own fit, on every turn it
    spoke in the inputs, and the roles it plays in the composed team."""

    model: str
    roles: list[str]
    """The composed team's roles this model plays."""
    classes: int
    """Item classes of its own fit (the team's classes are every combination of its models')."""
    claims: int
    turns: int
    factual_share: float
    model_reason: str
    """Why its fit has this number of classes."""
    runs: list[str]
    """The inputs it spoke in."""


def composition_said(composed: Sequence[ComposedPart], independence: Sequence[Independence]) -> str | None:
    """What a composed team's p_factual assumes, in a line (None: not composed)."""
    if not composed:
        return None
    parts = " and ".join(f"{p.model} ({', '.join(p.roles)})" for p in composed)
    said = f"composed from separate fits of {parts}: p_factual takes their errors as independent given the label"
    if not independence:
        return said + " (not tested: no two of them debated the same claims with several item classes each)"
    pairs = len(composed) * (len(composed) - 1) // 2
    untested = pairs - len({frozenset(t.models) for t in independence})
    # Each pair's test is said with its own claims: one pair's test says nothing of another's.
    kept = [f"{' and '.join(t.models)} on {t.claims} claims" for t in independence if not t.rejected]
    tested: list[str] = []
    if kept:
        tested.append(f"not rejected for {'; '.join(kept)} they both debated")
    if untested > 0:
        tested.append(f"{untested} of {pairs} model pairs not tested: no claims both debated with several classes each")
    return said + (f" ({'; '.join(tested)})" if tested else "")


def composed_team(composed: Sequence[ComposedPart]) -> str:
    """Each model of a composed team, its roles and claims, in a line."""
    return "; ".join(f"{p.model}: {', '.join(p.roles)}, {p.claims} claims" for p in composed)
