"""The options shared by every command that runs the engine, and how they become a VerifierConfig: each option's
default and help come from the config models' fields, so the CLI cannot drift from the Python API."""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from debate.cli.conventions import shown
from debate.cli.inputs import secret_from_file
from debate.config import (
    ClaimConfig,
    DebateConfig,
    ModelConfig,
    PrefilterConfig,
    RetrievalConfig,
    SearchConfig,
    TelemetryConfig,
    VerifierConfig,
)
from debate.errors import UsageError
from debate.plugins import CHAINS, PREFILTERS, RETRIEVERS, ROLLUPS, SEARCH_BACKENDS
from debate.workers import resolve_workers

__all__ = [
    "add_verifier_arguments",
    "items_in_flight",
    "verifier_config",
]

log = logging.getLogger("debate.cli")


def _field(model: type[BaseModel], name: str) -> tuple[Any, str]:
    """A config field's default and description: the CLI's defaults and help come from the config models."""
    info = model.model_fields[name]
    default = info.get_default(call_default_factory=True)
    return default, " ".join((info.description or "").split())


_FLAG_OF: dict[str, str] = {}
"""A config field's flag, for errors: the user typed --timeout, not timeout_s (the first model's field wins)."""


def _opt(group: Any, flags: Sequence[str], model: type[BaseModel], name: str, **kwargs: Any) -> None:
    _FLAG_OF.setdefault(name, flags[0])
    default, text = _field(model, name)
    value = shown(kwargs.pop("shown", default), flag=kwargs.get("action") == "store_true")
    group.add_argument(*flags, default=kwargs.pop("default", default), help=f"{text} (default: {value})", **kwargs)


class _VerifierOptions:
    """Adds the engine's option groups to one parser; an option the command fixes itself is left out."""

    def __init__(self, parser: argparse.ArgumentParser, fixed: Mapping[str, Any]) -> None:
        self.parser, self.fixed = parser, fixed

    def opt(self, group: Any, flags: Sequence[str], model: type[BaseModel], name: str, **kwargs: Any) -> None:
        if kwargs.get("dest", flags[0].lstrip("-").replace("-", "_")) not in self.fixed:
            _opt(group, flags, model, name, **kwargs)

    def claims(self) -> None:
        claims = self.parser.add_argument_group("claims, evidence and rollup")
        self.opt(
            claims, ["--claim-format"], ClaimConfig, "format", choices=["sentence", "triplet"], dest="claim_format"
        )
        self.opt(claims, ["--max-claims"], ClaimConfig, "max_claims", type=int)
        self.opt(claims, ["--retriever"], RetrievalConfig, "retriever", choices=RETRIEVERS.names())
        self.opt(claims, ["--top-k"], RetrievalConfig, "top_k", type=int)
        self.opt(claims, ["--retrieval-cache"], RetrievalConfig, "cache_dir", dest="retrieval_cache", metavar="DIR")
        claims.add_argument(
            "--search-backend",
            choices=SEARCH_BACKENDS.names(),
            help="search for claims without a reference (default: none, knowledge-free)",
        )
        self.opt(claims, ["--search-url"], SearchConfig, "base_url", dest="search_url", metavar="URL")
        claims.add_argument("--search-key", help="Serper key (default: SERPER_API_KEY)")
        self.opt(claims, ["--collection"], SearchConfig, "collection", metavar="JSONL")
        self.opt(claims, ["--results-per-query"], SearchConfig, "results_per_query", type=int)
        self.opt(claims, ["--rollup"], VerifierConfig, "rollup", choices=ROLLUPS.names())
        if "localize" not in self.fixed:
            help_text = "RefChecker's evidence localization: the evidence sentences each claim rests on"
            claims.add_argument("--localize", action="store_true", help=help_text)

    def prefilters(self) -> None:
        pre = self.parser.add_argument_group("prefilters (cheap checks before the debate)")
        pre.add_argument(
            "--prefilter",
            default="none",
            metavar="none|all|NAME[,NAME...]",
            help="prefilters to run, in order: none, all, or a comma-separated list of "
            f"{', '.join(PREFILTERS.names())} (default: none)",
        )
        pre.add_argument("--trust-grounded", action="store_true", help="let strongly grounded claims skip the debate")
        pre.add_argument(
            "--judge-two-step",
            action="store_true",
            help="rag-judge: a free-form, self-critical judgment first, then a second call converts it to JSON",
        )
        self.opt(pre, ["--judge-model"], PrefilterConfig, "judge_model", metavar="NAME")
        pre.add_argument(
            "--prefilter-option",
            action="append",
            default=[],
            metavar="NAME.KEY=VALUE",
            help="an option of a listed prefilter that declares its own (a plugin's), e.g. numbers.min_digits=2; "
            "VALUE is read as JSON when it parses, else as text; repeatable",
        )
        self.opt(pre, ["--grounded-confidence"], PrefilterConfig, "grounded_confidence", type=float)

    def chain(self) -> None:
        chain = self.parser.add_argument_group("chain")
        if "chain" not in self.fixed:
            chain.add_argument(
                "--chain",
                "--transition",
                dest="chain",
                metavar="NAME|FILE",
                default=_field(DebateConfig, "chain")[0],
                help=f"one of {', '.join(CHAINS.names())} (`debate chains` shows them), or a chain spec file "
                f"(default: {_field(DebateConfig, 'chain')[0]})",
            )
        self.opt(chain, ["--min-rounds"], DebateConfig, "min_rounds", type=int)
        self.opt(chain, ["--max-rounds"], DebateConfig, "max_rounds", type=int)
        self.opt(chain, ["--max-parse-retries"], DebateConfig, "max_parse_retries", type=int)
        self.opt(chain, ["--calibration"], DebateConfig, "calibration", metavar="FILE")
        self.opt(chain, ["--stop"], DebateConfig, "stop", metavar="consensus|posterior:P")
        self.opt(chain, ["--force"], DebateConfig, "force_calibration", action="store_true", dest="force_calibration")

    def model(self) -> None:
        model = self.parser.add_argument_group(
            "model (default: the embedded SmolLM2-135M; env OPENAI_BASE_URL, OPENAI_API_KEY, DEBATE_MODEL)"
        )
        model.add_argument(
            "--base-url",
            metavar="URL",
            help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 "
            "(default: OPENAI_BASE_URL, else the embedded model)",
        )
        model.add_argument("--model", help="model name (default: DEBATE_MODEL, else the endpoint's only model)")
        model.add_argument(
            "--api-key",
            help="API key; visible to other users in `ps`, prefer --api-key-file or "
            "OPENAI_API_KEY (default: OPENAI_API_KEY; needed for a hosted endpoint)",
        )
        model.add_argument(
            "--api-key-file",
            type=Path,
            metavar="FILE",
            help="read the API key from FILE (its first line): it stays out of `ps` (default: none)",
        )
        self.opt(model, ["--temperature"], ModelConfig, "temperature", type=float, default=None)
        self.opt(model, ["--seed"], ModelConfig, "seed", type=int, default=None)
        self.opt(
            model,
            ["--structured-output"],
            ModelConfig,
            "structured_output",
            choices=["auto", "json_schema", "json_object", "none"],
            default=None,
        )
        self.opt(
            model, ["--timeout"], ModelConfig, "timeout_s", type=float, default=None, dest="timeout", metavar="SECONDS"
        )

    def budget(self) -> None:
        budget = self.parser.add_argument_group("rate limits, prices and tracing")
        self.opt(budget, ["--rpm"], ModelConfig, "requests_per_minute", type=int, dest="rpm", metavar="N")
        self.opt(budget, ["--tpm"], ModelConfig, "tokens_per_minute", type=int, dest="tpm", metavar="N")
        self.opt(budget, ["--price-in"], ModelConfig, "price_in", type=float, metavar="USD")
        self.opt(budget, ["--price-out"], ModelConfig, "price_out", type=float, metavar="USD")
        self.opt(
            budget,
            ["--otel"],
            TelemetryConfig,
            "endpoint",
            dest="otel",
            metavar="URL",
            shown="OTEL_EXPORTER_OTLP_ENDPOINT, else off",
        )
        self.opt(budget, ["--otel-project"], TelemetryConfig, "project", metavar="NAME")

    def concurrency(self, *, batch: bool) -> None:
        conc = self.parser.add_argument_group("concurrency")
        self.opt(conc, ["--concurrency"], ModelConfig, "max_concurrency", type=int, dest="concurrency")
        self.opt(conc, ["--claim-concurrency"], VerifierConfig, "claim_concurrency", type=int)
        if batch:
            conc.add_argument(
                "--items",
                type=int,
                default=None,
                help="responses (batch lines, benchmark items) in progress at once (default: 2 x --concurrency)",
            )
            conc.add_argument(
                "--workers",
                type=_workers,
                default=1,
                metavar="N|auto",
                help="processes for a batch (--input, debate eval), sharing --concurrency; auto = one per core "
                "(default: 1)",
            )


def add_verifier_arguments(
    parser: argparse.ArgumentParser, *, batch: bool = True, fixed: Mapping[str, Any] | None = None
) -> None:
    """The options every command that runs the engine shares (chain, model, claims, evidence, prefilters).

    `batch=False` leaves out --items and --workers (a command that runs no batch); `fixed` maps option names
    (dests, e.g. "min_rounds") the command sets itself to their values: those options are not offered, since
    they would do nothing."""
    fixed = dict(fixed or {})
    options = _VerifierOptions(parser, fixed)
    options.claims()
    options.prefilters()
    options.chain()
    options.model()
    options.concurrency(batch=batch)
    options.budget()
    if "prompt_set" not in fixed:
        _opt(parser, ["--prompt-set", "--prompts-dir"], VerifierConfig, "prompt_set", metavar="NAME|DIR")
    parser.set_defaults(**fixed)


def _workers(value: str) -> int:
    try:
        return resolve_workers(value)
    except (ValueError, UsageError) as exc:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {value!r}") from exc


def items_in_flight(args: argparse.Namespace) -> int:
    """--items, else twice the model concurrency: enough work queued to keep every model slot busy."""
    value = args.items if args.items is not None else 2 * max(1, args.concurrency)
    if value < 1:
        raise UsageError("--items must be at least 1")
    return int(value)


def _prefilter_options(values: list[str]) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for given in values:
        key, sep, raw = given.partition("=")
        name, dot, field = key.partition(".")
        if not (sep and dot and name and field):
            raise UsageError(f"--prefilter-option {given!r}: expected NAME.KEY=VALUE, e.g. numbers.min_digits=2")
        try:
            value: Any = json.loads(raw)
        except (ValueError, RecursionError):
            # Not JSON (or past the parser's limits): the option's own validation sees the plain string.
            value = raw
        options.setdefault(name.strip(), {})[field.strip()] = value
    return options


def _prefilters(value: str) -> list[str]:
    if value == "none":
        return []
    if value == "all":
        builtin = ["rules", "logprob"]
        return builtin + [n for n in PREFILTERS.names() if n not in builtin]
    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names:
        if name not in PREFILTERS:
            raise UsageError(f"--prefilter: {PREFILTERS.unknown(name)}")
    return names


def _api_key(args: argparse.Namespace) -> str | None:
    if getattr(args, "api_key_file", None) is not None:
        if args.api_key:
            raise UsageError("give --api-key or --api-key-file, not both")
        return secret_from_file(args.api_key_file, "--api-key-file")
    if args.api_key:
        log.warning(
            "--api-key on the command line is visible to other users (ps); use --api-key-file or OPENAI_API_KEY"
        )
    key: str | None = args.api_key
    return key


def verifier_config(args: argparse.Namespace) -> VerifierConfig:
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    try:
        return VerifierConfig(
            model=ModelConfig.from_env(
                base_url=args.base_url,
                model=args.model,
                api_key=_api_key(args),
                temperature=args.temperature,
                seed=args.seed,
                structured_output=args.structured_output,
                timeout_s=args.timeout,
                max_concurrency=args.concurrency,
                requests_per_minute=getattr(args, "rpm", None),
                tokens_per_minute=getattr(args, "tpm", None),
                price_in=getattr(args, "price_in", None),
                price_out=getattr(args, "price_out", None),
            ),
            telemetry=TelemetryConfig(
                endpoint=getattr(args, "otel", None),
                project=getattr(args, "otel_project", None) or TelemetryConfig().project,
            ),
            debate=DebateConfig(
                min_rounds=args.min_rounds,
                max_rounds=args.max_rounds,
                chain=args.chain,
                max_parse_retries=args.max_parse_retries,
                calibration=getattr(args, "calibration", None),
                stop=getattr(args, "stop", "consensus"),
                force_calibration=getattr(args, "force_calibration", False),
            ),
            claim_concurrency=args.claim_concurrency,
            prompt_set=args.prompt_set,
            claims=ClaimConfig(
                format=args.claim_format, max_claims=args.max_claims, max_parse_retries=args.max_parse_retries
            ),
            retrieval=RetrievalConfig(retriever=args.retriever, top_k=args.top_k, cache_dir=args.retrieval_cache),
            search=None
            if args.search_backend is None
            else SearchConfig(
                backend=args.search_backend,
                base_url=args.search_url,
                api_key=args.search_key or os.environ.get("SERPER_API_KEY") or None,
                collection=args.collection,
                results_per_query=args.results_per_query,
            ),
            rollup=args.rollup,
            localize=getattr(args, "localize", False),
            prefilter=PrefilterConfig(
                prefilters=_prefilters(args.prefilter),
                trust_grounded=args.trust_grounded,
                grounded_confidence=args.grounded_confidence,
                judge_two_step=args.judge_two_step,
                judge_model=args.judge_model,
                options=_prefilter_options(args.prefilter_option),
            ),
        )
    except ValidationError as exc:
        raise _config_problem(exc) from exc


def _config_problem(exc: ValidationError) -> UsageError:
    """The first problem, named by the flag the user typed when there is one (--timeout, not timeout_s)."""
    first = exc.errors()[0]
    field = str(first["loc"][-1]) if first["loc"] else ""
    if field in _FLAG_OF:
        return UsageError(f"{_FLAG_OF[field]}: {first['msg']}")
    where = ".".join(str(p) for p in first["loc"])
    return UsageError(f"invalid configuration{f' ({where})' if where else ''}: {first['msg']}")
