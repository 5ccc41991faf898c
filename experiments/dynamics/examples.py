"""The example populations of docs/dynamics.md, one per assumption the prediction makes, and one that keeps them
all: tests and benchmarks use these, and the docs' roles files are checked against them."""

from __future__ import annotations

from experiments.dynamics.simulate import DifficultyClass, Population, RoleParameters

__all__ = ["CALIBRATION_EXAMPLES", "EXAMPLES"]


def _r(factual: float, hallucinated: float, conformity: float = 0.0, **more: object) -> RoleParameters:
    return RoleParameters.model_validate(
        {"factual_true": factual, "hallucinated_true": hallucinated, "conformity": conformity, **more}
    )


_MARKOV = {
    "initial": _r(0.75, 0.35),
    "trust": _r(0.85, 0.3, 0.6),
    "skeptic": _r(0.6, 0.1, 0.3),
    "leader": _r(0.7, 0.4, 0.5),
}

EXAMPLES: dict[str, Population] = {
    # every item alike, every role Markov: what the one-class model assumes
    "markov": Population(roles=_MARKOV, seed=7),
    # easy items (every role mostly right) and hard ones (every role mostly wrong); Markov within each
    "two-class": Population(
        roles=_MARKOV,
        classes=[
            DifficultyClass(share=0.6, factual_true=0.92, hallucinated_true=0.08),
            DifficultyClass(share=0.4, factual_true=0.25, hallucinated_true=0.75),
        ],
        seed=7,
    ),
    # trust and skeptic sometimes repeat the opinion before the ones they are shown
    "memory": Population(
        roles={**_MARKOV, "trust": _r(0.8, 0.3, 0.0, memory=0.5), "skeptic": _r(0.7, 0.2, 0.0, memory=0.5)}, seed=7
    ),
    # trust ignores what it is shown in S1 (where it speaks first) and conforms in S2
    "state": Population(roles={**_MARKOV, "trust": _r(0.85, 0.3, 0.6, states={"S1": _r(0.85, 0.3, 0.0)})}, seed=7),
}


CALIBRATION_EXAMPLES: dict[str, Population] = {
    **EXAMPLES,
    # easy, middling and hard items in unequal shares: what a one-class posterior would be overconfident on
    "three-class": Population(
        roles=_MARKOV,
        classes=[
            DifficultyClass(share=0.5, factual_true=0.95, hallucinated_true=0.05),
            DifficultyClass(share=0.3, factual_true=0.75, hallucinated_true=0.3),
            DifficultyClass(share=0.2, factual_true=0.3, hallucinated_true=0.7),
        ],
        seed=11,
    ),
    # every role leans to "true" (a lenient judge model); items alike
    "lenient": Population(
        roles={
            "initial": _r(0.9, 0.5),
            "trust": _r(0.95, 0.6, 0.7),
            "skeptic": _r(0.7, 0.3, 0.2),
            "leader": _r(0.85, 0.45, 0.5),
        },
        seed=13,
    ),
}
"""The populations the calibration benchmarks run on (benchmarks/bench_posterior.py): the examples above and two
more, one of items of unequal difficulty."""
