"""`debate` command line: a thin layer over the Python API. Exit 0 done, 2 usage/config error, 1 runtime failure."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from debate.api import TASKS, Verifier
from debate.batch import BatchError, run_batch
from debate.chain import TRANSITION_RULES
from debate.claims import ExtractionError
from debate.config import (
    ClaimConfig,
    DebateConfig,
    ModelConfig,
    PrefilterConfig,
    RetrievalConfig,
    SearchConfig,
    VerifierConfig,
)
from debate.errors import UsageError
from debate.llm import ModelError
from debate.llm.embedded import EmbeddedModelError
from debate.prefilter.tools import ToolCallChecker, ToolRegistry, correction_message
from debate.prompts import PromptError
from debate.retrieval import RETRIEVERS
from debate.types import Report

__all__ = ["COMMAND_ENTRY_POINT_GROUP", "UsageError", "add_verifier_arguments", "main", "verifier_config"]

COMMAND_ENTRY_POINT_GROUP = "markov_debate.commands"
"""Entry points adding subcommands (a function taking the subparsers); each sets `handler` on its parser."""

_err = Console(stderr=True)
_out = Console()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_verifier_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every command that runs the engine shares (chain, model, claims, evidence, prefilters)."""
    claims = parser.add_argument_group("claims, evidence and rollup")
    claims.add_argument("--claim-format", choices=["sentence", "triplet"], default="sentence")
    claims.add_argument("--max-claims", type=int, default=25)
    claims.add_argument("--retriever", choices=sorted(RETRIEVERS), default="dense", help="document retriever")
    claims.add_argument("--top-k", type=int, default=10, help="document sentences per claim (default 10)")
    claims.add_argument("--retrieval-cache", help="directory to keep retrieval results in (content-hash keys)")
    claims.add_argument("--search-backend", choices=["serper", "local"], help="search for claims without reference")
    claims.add_argument("--search-url", default="https://google.serper.dev", help="Serper-compatible endpoint")
    claims.add_argument("--search-key", help="Serper key (prefer SERPER_API_KEY)")
    claims.add_argument("--collection", help="JSONL of {title, text} for --search-backend local")
    claims.add_argument("--rollup", choices=["any-false", "strict", "soft", "major"], default="any-false")
    pre = parser.add_argument_group("prefilters (cheap checks before the debate)")
    pre.add_argument("--prefilter", choices=["none", "rules", "logprob", "all"], default="none")
    pre.add_argument("--trust-grounded", action="store_true", help="let strongly grounded claims skip the debate")
    pre.add_argument("--grounded-confidence", type=float, default=0.8, help="confidence needed to skip (default 0.8)")
    chain = parser.add_argument_group("chain")
    chain.add_argument("--min-rounds", type=int, default=2, help="debate rounds before consensus may stop (default 2)")
    chain.add_argument("--max-rounds", type=int, default=5, help="round limit (default 5)")
    chain.add_argument("--transition", choices=sorted(TRANSITION_RULES), default="true-to-skeptic")
    chain.add_argument("--max-parse-retries", type=int, default=2, help="re-asks after an unusable reply (default 2)")
    model = parser.add_argument_group(
        "model (default: the embedded SmolLM2-135M; env OPENAI_BASE_URL, OPENAI_API_KEY, DEBATE_MODEL)"
    )
    model.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    model.add_argument("--model", help="model name (default: the endpoint's only model)")
    model.add_argument("--api-key", help="API key (prefer OPENAI_API_KEY)")
    model.add_argument("--temperature", type=float, default=None)
    model.add_argument("--seed", type=int, default=None, help="endpoint seed (and sampling seed for experiments)")
    model.add_argument("--structured-output", choices=["auto", "json_schema", "json_object", "none"], default=None)
    model.add_argument("--timeout", type=float, default=None, help="seconds per request")
    parser.add_argument("--concurrency", type=int, default=2, help="items in flight (default 2)")
    parser.add_argument("--prompts-dir", help="load prompt files from this directory instead of the packaged ones")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="debate", description="Detect hallucinations by Markov-chain multi-agent debate.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log retries and server start-up")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = sub.add_parser("verify", help="verify a response (or a JSONL batch of them)")
    v.add_argument(
        "--task",
        choices=list(TASKS),
        default="qa",
        help="qa: question+answer is one claim; summarization: claims vs. top-k document sentences; "
        "dialogue: subjective filter then claims; kbqa/general: claims vs. reference or search; "
        "rag: cited sentences vs. their sources",
    )
    single = v.add_argument_group("one response")
    single.add_argument("--question", help="the question (dialogue: the dialogue history)")
    single.add_argument("--answer", "--response", dest="answer", help="the response to check")
    single.add_argument("--evidence", "--reference", dest="evidence",
                        help="knowledge or source document, as text or @FILE")  # fmt: skip
    single.add_argument("--sources", help="task rag: JSON file of {id: text} or [{id, text, parent_id}]")
    batch = v.add_argument_group("batch")
    batch.add_argument("--input", type=Path, help="JSONL with id, question, response, reference")
    batch.add_argument("--output", type=Path, help="JSONL to append results to (re-running resumes)")
    add_verifier_arguments(v)
    v.add_argument("--json", action="store_true", help="print the Report as JSON")
    tools = sub.add_parser("check-tools", help="audit a tool call against JSON-schema tool definitions")
    tools.add_argument("--registry", type=Path, required=True, help="JSON list of tool definitions (OpenAI format)")
    tools.add_argument("--call", type=Path, required=True, help='JSON {"name", "arguments"} (or an OpenAI tool_call)')
    tools.add_argument("--json", action="store_true", help="print the findings as JSON")
    for entry in entry_points(group=COMMAND_ENTRY_POINT_GROUP):
        register: Callable[[Any], None] = entry.load()
        register(sub)
    return parser


def _read_evidence(value: str | None) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            return path.read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise UsageError(f"--evidence: cannot read {path}: {exc.strerror}") from exc
    return value, "--evidence"


def _read_json(path: Path, flag: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag}: {path} line {exc.lineno}: not valid JSON ({exc.msg})") from exc


def _check_tools(args: argparse.Namespace) -> int:
    try:
        registry = ToolRegistry.from_file(args.registry)
    except OSError as exc:
        raise UsageError(f"--registry: cannot read {args.registry}: {exc.strerror}") from exc
    except ValueError as exc:
        raise UsageError(f"--registry {args.registry}: {exc}") from exc
    call = _read_json(args.call, "--call")
    body = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise UsageError(f'--call {args.call}: expected {{"name": ..., "arguments": ...}}')
    findings = ToolCallChecker(registry).check(body["name"], body.get("arguments", {}))
    if args.json:
        sys.stdout.write(json.dumps([f.model_dump() for f in findings], indent=2) + "\n")
    elif findings:
        for f in findings:
            _out.print(f"[red]{f.kind}[/] ({f.confidence:.2f}): {f.evidence}\n  fix: {f.correction}")
        _out.print(f"\n{correction_message(findings)}")
    else:
        _out.print("[green]no findings[/]: the call matches its tool definition")
    return 1 if findings else 0


def verifier_config(args: argparse.Namespace) -> VerifierConfig:
    try:
        return VerifierConfig(
            model=ModelConfig.from_env(
                base_url=args.base_url,
                model=args.model,
                api_key=args.api_key,
                temperature=args.temperature,
                seed=args.seed,
                structured_output=args.structured_output,
                timeout_s=args.timeout,
                max_concurrency=max(1, args.concurrency),
            ),
            debate=DebateConfig(
                min_rounds=args.min_rounds,
                max_rounds=args.max_rounds,
                transition=args.transition,
                max_parse_retries=args.max_parse_retries,
            ),
            concurrency=args.concurrency,
            claims=ClaimConfig(format=args.claim_format, max_claims=args.max_claims,
                               max_parse_retries=args.max_parse_retries),
            retrieval=RetrievalConfig(retriever=args.retriever, top_k=args.top_k, cache_dir=args.retrieval_cache),
            search=None
            if args.search_backend is None
            else SearchConfig(
                backend=args.search_backend,
                base_url=args.search_url,
                api_key=args.search_key or os.environ.get("SERPER_API_KEY") or None,
                collection=args.collection,
            ),
            rollup=args.rollup,
            prefilter=PrefilterConfig(mode=args.prefilter, trust_grounded=args.trust_grounded,
                                      grounded_confidence=args.grounded_confidence),
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"invalid configuration{f' ({where})' if where else ''}: {first['msg']}") from exc


def _render(report: Report) -> None:
    colour = {"factual": "green", "non_factual": "red", "unverifiable": "yellow", "no_claims": "blue"}[report.verdict]
    score = "n/a" if report.score is None else f"{report.score:.2f}"
    _out.print(
        Panel.fit(f"[bold {colour}]{report.verdict.upper()}[/]  score {score}  ({report.rollup})", title="verdict")
    )
    _out.print(f"task: {report.task}   claims: {len(report.claims)} ({report.extraction.method})")
    if report.note:
        _out.print(f"note: {report.note}")
    if report.prefilter is not None:
        p = report.prefilter
        _out.print(
            f"prefilter ({p.mode}): {p.decided} claims decided without debate, {p.prefilter_calls} prefilter calls, "
            f"at least {p.debate_calls_saved} debate calls saved" + (f"; {p.note}" if p.note else "")
        )
        if p.citation is not None:
            c = p.citation
            _out.print(
                f"citations: risk {c.risk_level} (score {c.hallucination_risk_score:.2f}), "
                f"ratio {c.citation_ratio:.2f}, invalid {c.invalid_citations or 'none'}, "
                f"{len(c.uncited_sentences)} uncited long sentences"
            )
    for claim in report.claims:
        _out.print(f"[bold]claim[/] {claim.claim_id}: {claim.text}")
        for decision in claim.prefilters:
            _out.print(f"  prefilter {decision.name}: {decision.decision} ({decision.reason})")
        if claim.status == "unverifiable":
            _out.print(f"  [yellow]unverifiable[/]: {claim.reason}")
        else:
            _out.print(f"  factual: {claim.factual}   error severity: {claim.error_severity}")
        if claim.debate is None:
            continue
        d = claim.debate
        consensus = "n/a" if d.consensus is None else str(d.consensus).lower()
        _out.print(
            f"  chain: {' -> '.join(s.name for s in d.states)}   rounds: {d.rounds}   consensus: {consensus}"
            f"   stopped: {d.stop_reason}"
        )
        table = Table(show_lines=True)
        for column in ("state", "round", "agent", "factual", "sev", "opinion"):
            table.add_column(column, overflow="fold")
        for state in d.states:
            for turn in state.turns:
                table.add_row(
                    state.name,
                    str(state.round),
                    turn.role,
                    "-" if turn.factuality is None else str(turn.factuality),
                    "-" if turn.error_severity is None else str(turn.error_severity),
                    turn.opinion if turn.error is None else f"[yellow]{turn.error}[/]",
                )
        _out.print(table)
    u = report.usage
    _out.print(
        f"model: {report.meta.model}   calls: {u.llm_calls}   tokens: {u.prompt_tokens} prompt + "
        f"{u.completion_tokens} completion   time: {report.elapsed_s:.1f}s"
    )


async def _verify(args: argparse.Namespace) -> int:
    config = verifier_config(args)
    batch_mode = args.input is not None or args.output is not None
    if batch_mode:
        if args.input is None or args.output is None:
            raise UsageError("batch mode needs both --input and --output")
        if args.answer is not None or args.question is not None or args.evidence is not None:
            raise UsageError("--input/--output cannot be combined with --question/--answer/--evidence")
        if not args.input.is_file():
            raise UsageError(f"--input: no such file: {args.input}")
        if args.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
    answer: str | None = args.answer
    if not batch_mode and (answer is None or not answer.strip()):
        raise UsageError("give a non-empty --answer (with --question and --evidence), or --input and --output")
    evidence, evidence_source = (None, None) if batch_mode else _read_evidence(args.evidence)
    reference: Any = evidence
    if args.task == "rag" and not batch_mode:
        if args.sources is None:
            raise UsageError("--task rag needs --sources FILE (JSON {id: text} or [{id, text, parent_id}])")
        reference = _read_json(Path(args.sources), "--sources")

    if config.model.base_url is None:
        _err.print(
            "[dim]no endpoint configured: starting the embedded model SmolLM2-135M-Instruct (Q4_1, llama.cpp)…[/]"
        )
    async with Verifier(config=config, prompts_dir=args.prompts_dir) as verifier:
        where = "embedded llama.cpp" if verifier.embedded else config.model.base_url
        _err.print(f"[dim]model: {verifier.client.model_name} ({where})[/]")
        if batch_mode:
            return await _run_batch(verifier, args)
        assert answer is not None  # checked above
        try:
            report = await verifier.verify(
                answer, question=args.question, reference=reference, reference_source=evidence_source, task=args.task
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    if args.json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        _render(report)
    return 0


async def _run_batch(verifier: Verifier, args: argparse.Namespace) -> int:
    with args.input.open("rb") as fh:
        total = sum(1 for line in fh if line.strip())
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_err,
    )
    with progress:
        task = progress.add_task("verifying", total=total)

        def advance(record: dict[str, Any]) -> None:
            progress.advance(task)

        summary = await run_batch(
            verifier=verifier,
            input_path=args.input,
            output_path=args.output,
            concurrency=args.concurrency,
            task=args.task,
            on_record=advance,
        )
        progress.update(task, completed=summary.processed + summary.skipped_done)
    print(
        f"done: {summary.processed} written ({summary.factual} factual, {summary.non_factual} non-factual, "
        f"{summary.unverifiable} unverifiable, {summary.errors} errors), {summary.skipped_done} already done -> "
        f"{args.output}",
        file=sys.stderr,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        if args.command == "verify":
            return asyncio.run(_verify(args))
        if args.command == "check-tools":
            return _check_tools(args)
        handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
        if handler is not None:
            return handler(args)
        raise UsageError(f"unknown command {args.command}")  # pragma: no cover - argparse rejects it first
    except (UsageError, PromptError, LookupError) as exc:
        print(f"debate: error: {exc}", file=sys.stderr)
        return 2
    except (ModelError, EmbeddedModelError, BatchError, ExtractionError) as exc:
        print(f"debate: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("debate: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
