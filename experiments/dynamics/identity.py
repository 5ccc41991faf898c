"""Claims with an identity across a fit's inputs: a claim is its input and its id, so two logs that reuse ids
(one log per week, each numbering its lines from the start) are two sets of claims; the same debate given twice (a
log and the desk's export of it, a copied log) is found by its content (observe.claim_digest) and counted once."""

from __future__ import annotations

import dataclasses

from debate.errors import UsageError
from experiments.dynamics.observe import RunObservations

__all__ = ["distinct_claims"]


def distinct_claims(
    runs: list[RunObservations], *, shared_ids: bool = False
) -> tuple[list[RunObservations], dict[str, int], list[str]]:
    """Each claim once across `runs`, where a claim is its input and its id: a claim id another input already
    used is a claim of its own (renamed `<input>:<id>`); the same debate given again (by its digest: a log and its
    desk export, a copied log) is counted once, its label taken where the first copy had none; the same debate
    with two different labels is refused naming both. Returns the runs (an input whose every claim was given
    before left out), the claims each input adds (by input, in order) and a line for each thing done."""
    seen: dict[str, tuple[int, str, bool | None]] = {}
    used: set[str] = set()
    relabel: dict[str, bool] = {}
    kept: list[tuple[int, RunObservations]] = []
    counts: dict[str, int] = {}
    notes: list[str] = []
    for index, run in enumerate(runs):
        labels = {o.item: o.label for o in run.observations} | {k: v[0] for k, v in run.finals.items()}
        rename: dict[str, str] = {}
        again: dict[str, int] = {}
        for key, label in labels.items():
            digest = run.digests.get(key)
            if digest is not None and digest in seen:
                j, first, had = seen[digest]
                if had is not None and label is not None and had != label:
                    raise UsageError(
                        f"claim {first} of {runs[j].run_dir} and claim {key} of {run.run_dir} are the same debate "
                        f"labelled {had} and {label}: correct the label of one, then fit again"
                    )
                if had is None and label is not None:
                    relabel[first] = label
                    seen[digest] = (j, first, label)
                again[str(runs[j].run_dir)] = again.get(str(runs[j].run_dir), 0) + 1
                continue
            # shared_ids: the inputs are runs of other teams on the same claims (a composed team's fit pairs
            # them by id), so an id another input used names the same claim
            name = key if shared_ids or key not in used else f"{run.run_dir}:{key}"
            while name in used and not shared_ids:
                name = f"{name}#{index}"
            used.add(name)
            rename[key] = name
            if digest is not None:
                seen[digest] = (index, name, label)
        for source, n in again.items():
            notes.append(
                f"{run.run_dir}: {n} claim(s) are the same debates as in {source} (found by their content): "
                "counted once"
            )
        renamed = sum(key != name for key, name in rename.items())
        if renamed:
            notes.append(
                f"{run.run_dir}: {renamed} claim id(s) an earlier input also used: fitted as claims of their own, "
                f"named '{run.run_dir}:<id>'"
            )
        counts[str(run.run_dir)] = len(rename)
        if rename:
            kept.append((index, _renamed(run, rename)))
    return [_relabelled(run, relabel) for _, run in kept], counts, notes


def _renamed(run: RunObservations, rename: dict[str, str]) -> RunObservations:
    """`run` with only the claims of `rename`, under their new names."""
    return dataclasses.replace(
        run,
        observations=[dataclasses.replace(o, item=rename[o.item]) for o in run.observations if o.item in rename],
        finals={rename[k]: v for k, v in run.finals.items() if k in rename},
        p_factual={rename[k]: v for k, v in run.p_factual.items() if k in rename},
        digests={rename[k]: v for k, v in run.digests.items() if k in rename},
    )


def _relabelled(run: RunObservations, labels: dict[str, bool]) -> RunObservations:
    if not any(o.item in labels for o in run.observations) and not any(k in labels for k in run.finals):
        return run
    return dataclasses.replace(
        run,
        observations=[
            dataclasses.replace(o, label=labels[o.item]) if o.item in labels else o for o in run.observations
        ],
        finals={k: (labels[k], *v[1:]) if k in labels else v for k, v in run.finals.items()},
    )
