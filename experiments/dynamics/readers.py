"""Where recorded debates are read from, as observations (experiments.dynamics.observe): an experiment run folder,
a results log (`debate verify --output`), the desk's audit export or its store; with the settings each was run at,
and the calibration its stop decided with."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import TypeAdapter

from debate.config import DebateConfig
from debate.errors import UsageError
from debate.results import PredictionRecord, ResultRecord, read_records
from debate.types import DebateResult, ModelIdentity, Report, RunMeta
from experiments.dynamics.observe import Observation, RunObservations, claim_digest, claim_labels, observations

if TYPE_CHECKING:
    from debate.engine import MarkovChain, PosteriorModel

__all__ = ["read_log", "read_run", "read_store", "stop_calibration"]


@dataclass
class _Meta:
    model: str = ""
    prompts: dict[str, str] = field(default_factory=dict)
    roles: dict[str, str] | None = None
    calibration_sha256: str | None = None
    team: dict[str, ModelIdentity] | None = None


def _debates(run_dir: Path, meta: _Meta) -> Iterator[tuple[str, bool, dict[str, Any], datetime]]:
    for record in read_records(run_dir / "results.jsonl"):
        if not isinstance(record, PredictionRecord) or record.report is None:
            continue
        label = record.label_factual
        recorded = record.report.get("meta") or {}
        meta.model = meta.model or str(recorded.get("model", ""))
        meta.prompts = meta.prompts or dict(recorded.get("prompts", {}))
        meta.roles = dict(recorded.get("roles") or {}) if meta.roles is None else meta.roles
        if meta.team is None:
            meta.team = {role: ModelIdentity.model_validate(i) for role, i in (recorded.get("team") or {}).items()}
        meta.calibration_sha256 = meta.calibration_sha256 or (recorded.get("files") or {}).get("debate.calibration")
        for claim in record.report.get("claims", []):
            if claim.get("debate") and claim.get("decided_by", "debate") == "debate":
                _one_team([t.get("name") for t in claim["debate"].get("teams") or []], f"{run_dir}: record {record.id}")
                yield f"{record.id}/{claim['claim_id']}", label, claim, _made(recorded.get("created_at"))


def _made(value: Any) -> datetime:
    """A recorded report's `meta.created_at` (JSON text) as a time; the epoch where it is missing or unreadable."""
    try:
        return _TIME.validate_python(value)
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


_TIME: TypeAdapter[datetime] = TypeAdapter(datetime)


def read_run(run_dir: Path) -> RunObservations:
    """Every debate of an experiment run folder (config.json + results.jsonl), or of a results log (`debate verify
    --output FILE`, its lines' `label_factual` where given)."""
    if not run_dir.exists():
        raise UsageError(f"{run_dir}: no such file or folder")
    if run_dir.is_file():
        if (run_dir.parent / "config.json").is_file() and run_dir.name == "results.jsonl":
            raise UsageError(
                f"{run_dir} is the results log of the experiment run folder {run_dir.parent}: give the folder "
                f"(`debate dynamics fit {run_dir.parent}`), whose config.json holds the settings it was run with"
            )
        return read_log(run_dir)
    try:
        config = json.loads((run_dir / "config.json").read_text())
        verifier = config["spec"]["verifier"]
        debate = DebateConfig.model_validate(verifier.get("debate", {}))
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"{run_dir}: not an experiment run folder ({exc})") from exc
    from debate.engine import load_chain

    chain = load_chain(debate.chain)
    seen: list[Observation] = []
    finals: dict[str, tuple[bool | None, bool, int]] = {}
    probabilities: dict[str, float] = {}
    digests: dict[str, str] = {}
    meta = _Meta()
    for key, label, claim, made in _debates(run_dir, meta):
        if key in digests:
            raise UsageError(f"{run_dir}: claim {key} is in its results twice: fit each debate of a claim once")
        result = DebateResult.model_validate(claim["debate"])
        digests[key] = claim_digest(made, str(claim.get("text", "")), result)
        seen.extend(observations(result, chain, item=key, label=label))
        if result.final is not None:
            finals[key] = (label, result.final.factuality, result.usage.llm_calls)
        if claim.get("p_factual") is not None:
            probabilities[key] = float(claim["p_factual"])
    if not finals:
        raise UsageError(f"{run_dir}: no finished debate to fit (was the method mcmad?)")
    return RunObservations(
        run_dir,
        chain.name,
        debate.min_rounds,
        debate.max_rounds,
        seen,
        finals,
        debate=debate,
        model=meta.model or str(config.get("model", "")),
        prompts=meta.prompts or dict(config.get("prompts", {})),
        p_factual=probabilities,
        team=(str(verifier.get("team", "autogen")), str(verifier.get("prompt_set") or "paper")),
        roles=meta.roles or {},
        identities=meta.team or {},
        digests=digests,
        calibration_sha256=meta.calibration_sha256,
    )


def _label(record: ResultRecord) -> bool | None:
    value = (record.model_extra or {}).get("label_factual")
    return value if isinstance(value, bool) else None


_REVIEWED = {"factual": True, "non_factual": False}
"""A reviewer's label as a claim's truth (not enough evidence, unverifiable: no label)."""


def _desk_export(path: Path) -> Iterator[tuple[int, str, Report, list[bool | None]]]:
    """The desk's audit export (`GET /v1/audits/export`, jsonl): each finished audit's report, its claims labelled
    by their latest review."""
    with path.open(encoding="utf-8") as lines:
        yield from _desk_lines(lines, str(path))


def _desk_lines(lines: Iterable[str], source: str) -> Iterator[tuple[int, str, Report, list[bool | None]]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            report = Report.model_validate(row["report"]) if row.get("report") else None
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{source}: line {number}: not a desk export line ({exc})") from exc
        if report is None:
            continue
        latest = {r["claim_id"]: r["label"] for r in row.get("reviews", []) if isinstance(r, dict)}
        labels = [_REVIEWED.get(latest.get(c.claim_id, "")) for c in report.claims]
        yield number, f"audit-{row.get('audit_id', number)}", report, labels


def _results_log(path: Path) -> Iterator[tuple[int, str, Report, list[bool | None]]]:
    """A `debate verify --output` log: each report, its claims labelled from the line's `label_factual`."""
    for number, record in enumerate(read_records(path), 1):
        if isinstance(record, ResultRecord):
            key = record.key or f"line:{record.line}"
            yield number, key, record.result, claim_labels(_label(record), len(record.result.claims))


def _is_desk_export(path: Path) -> bool:
    with path.open(encoding="utf-8", errors="replace") as lines:
        first = next((line for line in lines if line.strip()), "")
    try:
        row = json.loads(first)
    except ValueError:
        return False
    return isinstance(row, dict) and {"audit_id", "report", "reviews"} <= set(row)


def read_log(path: Path) -> RunObservations:
    """Every debate of a results log (`debate verify --output FILE`, its lines' `label_factual`) or of the desk's
    audit export (its reviewers' labels); the settings from the reports' own resolved configuration, which every
    report must share."""
    reports = _desk_export(path) if _is_desk_export(path) else _results_log(path)
    return _read_reports(reports, path)


def read_store(url: str) -> RunObservations:
    """Every finished audit of the desk's database at `url` (a SQLAlchemy URL), each claim labelled by its latest
    review: the store is read through the installed `markov_debate.stores` entry point `desk`, so the experiments
    never import the desk."""
    from debate.plugins import RESULT_STORES

    shown = _without_password(url)
    return _read_reports(_desk_lines(RESULT_STORES.get("desk")(url), shown), shown)


def _without_password(url: str) -> str:
    # A fit's output and its saved file name where it read from; a password in the URL is no part of that.
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _read_reports(reports: Iterable[tuple[int, str, Report, list[bool | None]]], path: Path | str) -> RunObservations:
    from debate.engine import load_chain

    seen: list[Observation] = []
    finals: dict[str, tuple[bool | None, bool, int]] = {}
    probabilities: dict[str, float] = {}
    first: tuple[int, DebateConfig, RunMeta] | None = None
    chain: MarkovChain | None = None
    where: dict[str, int] = {}
    digests: dict[str, str] = {}
    for number, key, report, labels in reports:
        debate = _debate_settings(path, number, report)
        if first is None:
            first, chain = (number, debate, report.meta), load_chain(debate.chain)
        else:
            _as_first(path, (number, debate, report.meta), first)
        assert chain is not None
        for claim, label in zip(report.claims, labels, strict=True):
            if claim.debate is None or claim.decided_by != "debate":
                continue
            name = f"{key}/{claim.claim_id}"
            if name in where:
                raise UsageError(
                    f"{path}: claim {name} is in record {where[name]} and again in record {number}: fit each debate "
                    "of a claim once"
                )
            where[name] = number
            digests[name] = claim_digest(report.meta.created_at, claim.text, claim.debate)
            _one_team([t.name for t in claim.debate.teams], f"{path}: record {number}")
            seen.extend(observations(claim.debate, chain, item=name, label=label))
            if claim.debate.final is not None:
                finals[name] = (label, claim.debate.final.factuality, claim.debate.usage.llm_calls)
            if claim.p_factual is not None:
                probabilities[name] = claim.p_factual
    if first is None or not finals:
        raise UsageError(
            f"{path}: no finished debate to fit (a results log of `debate verify --output`, a desk with finished "
            "audits?)"
        )
    _, debate, meta = first
    assert chain is not None
    return RunObservations(
        path,
        chain.name,
        debate.min_rounds,
        debate.max_rounds,
        seen,
        finals,
        debate=debate,
        model=meta.model,
        prompts=dict(meta.prompts),
        p_factual=probabilities,
        team=(str(meta.config.get("team", "autogen")), meta.prompt_set),
        roles=dict(meta.roles),
        identities=dict(meta.team),
        digests=digests,
        calibration_sha256=meta.files.get("debate.calibration"),
    )


def _debate_settings(path: Path | str, number: int, report: Report) -> DebateConfig:
    try:
        return DebateConfig.model_validate(report.meta.config.get("debate", {}))
    except ValueError as exc:
        raise UsageError(f"{path}: record {number}: its report's debate settings do not read ({exc})") from exc


def stop_calibration(run: RunObservations) -> PosteriorModel | None:
    """The calibration a run's posterior or cascade stop decided with (None under the paper's rule), read from
    its path only when it is the file the run recorded: another file there (refitted since, replaced) would fit
    the run's stopping against a rule it did not follow."""
    if run.debate.threshold is None or run.debate.calibration is None:
        return None
    from debate.calibration import load_calibration
    from debate.provenance import file_sha256

    path = Path(run.debate.calibration)
    now = file_sha256(path)
    if run.calibration_sha256 is not None and now != run.calibration_sha256:
        raise UsageError(
            f"{run.run_dir}: its stop decided with the calibration {path} of sha256 {run.calibration_sha256[:12]}, "
            f"and that path now holds {'no readable file' if now is None else f'sha256 {now[:12]}'}; put that "
            "file back at the path to fit this run"
        )
    return load_calibration(path).posterior


def _as_first(
    path: Path | str, record: tuple[int, DebateConfig, RunMeta], first: tuple[int, DebateConfig, RunMeta]
) -> None:
    """Refuse a record debated under other settings, or by another team, than the log's first."""
    number, debate, meta = record
    if _settings(debate) != _settings(first[1]):
        raise UsageError(
            f"{path}: record {number} was debated under other settings than record {first[0]} "
            f"({_settings(debate)} against {_settings(first[1])}): fit one setting at a time"
        )
    if _team(meta) != _team(first[2]):
        raise UsageError(
            f"{path}: record {number} was debated by another team than record {first[0]} ({_team(meta)} "
            f"against {_team(first[2])}): fit one team at a time"
        )


def _one_team(teams: list[str | None], where: str) -> None:
    """A debate the cascade or voi stop gave to another team holds turns of that team's models under the same roles:
    fitted as the run's team's, each role's rates would mix two models' without a word (one claim spoken by
    another team alone too). Refused until the fit keys its contexts by model."""
    if len(teams) > 1 or any(name != "first" for name in teams):
        raise UsageError(
            f"{where}: a debate the cascade or voi stop gave to another team's models ({', '.join(map(str, teams))});"
            " fit each team's calibration on a run of that team alone (docs/teams.md)"
        )


def _team(meta: RunMeta) -> str:
    """A run's models, in a line: `model`, and each role on another."""
    said = meta.model + "".join(f", {role} on {model}" for role, model in sorted(meta.roles.items()))
    # Two records at other sampling settings are two teams even where their labels agree.
    return said + "".join(f", {role} at {i.sampling()}" for role, i in sorted(meta.team.items()))


def _settings(debate: DebateConfig) -> tuple[object, ...]:
    return (debate.chain, debate.min_rounds, debate.max_rounds, debate.stop, debate.calibration)
