"""The desk's statistics: counts by status, verdict and task; how often reviewers agree with the engine, with
Cohen's kappa (scikit-learn), in total and per day or week; model usage and cost. Computed from the store's
figures (`Store.figures`), so the store itself needs no statistics library."""

from __future__ import annotations

from typing import Literal, get_args

from markov_debate.desk.models import AgreementPoint, EngineLabel, Stats
from markov_debate.desk.store import Store

__all__ = ["stats"]

_LABELS: list[str] = list(get_args(EngineLabel))


def stats(store: Store, *, bucket: Literal["day", "week"] = "day", owner: str | None = None) -> Stats:
    """The statistics of everything in `store` (`owner`: of that submitter's audits only)."""
    figures = store.figures(owner=owner)
    reviews = figures.reviews
    periods: dict[str, list[tuple[str, str]]] = {}
    for created, engine, label, _, _ in reviews:
        day = created.date()
        key = day.isoformat() if bucket == "day" else f"{day.isocalendar().year}-W{day.isocalendar().week:02d}"
        periods.setdefault(key, []).append((engine, label))
    pairs = [(engine, label) for _, engine, label, _, _ in reviews]
    return Stats(
        by_status=figures.by_status,
        by_verdict=figures.by_verdict,
        by_task=figures.by_task,
        reviews=len(reviews),
        reviewed_claims=len({(a, c) for *_, a, c in reviews}),
        agreement=sum(e == h for e, h in pairs) / len(pairs) if pairs else None,
        kappa=_kappa(pairs) if pairs else None,
        over_time=[
            AgreementPoint(period=k, reviews=len(v), agreement=sum(e == h for e, h in v) / len(v), kappa=_kappa(v))
            for k, v in sorted(periods.items())
        ],
        llm_calls=figures.calls,
        prompt_tokens=figures.prompt_tokens,
        completion_tokens=figures.completion_tokens,
        cost=figures.cost,
        flat_priced=figures.flat_priced,
    )


def _kappa(pairs: list[tuple[str, str]]) -> float | None:
    from sklearn.metrics import cohen_kappa_score  # scikit-learn costs ~1 s to import: only the stats need it

    engine, human = [p[0] for p in pairs], [p[1] for p in pairs]
    if len(set(engine) | set(human)) < 2:
        return None  # one category only: kappa is undefined
    value = float(cohen_kappa_score(engine, human, labels=_LABELS))
    return None if value != value else value
