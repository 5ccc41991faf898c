"""`debate verify`: one response (printed as a report), or a JSONL batch (a resumable results log)."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rich.progress import TextColumn

from debate.cli import cost as costs
from debate.cli.batch_summary import batch_exit, done_line, gate_exit
from debate.cli.conventions import (
    EXIT_CODES,
    Subcommands,
    add_command,
    err,
    examples,
    mark_brief,
    out,
    progress_bar,
)
from debate.cli.cost import CostGate, add_cost_arguments, cost_gate, cost_line, run_estimate
from debate.cli.inputs import check_input, check_output, one_input
from debate.cli.interrupts import kept_records, on_interrupt
from debate.cli.options import add_verifier_arguments, items_in_flight, positive_int, verifier_config
from debate.cli.render import render_report
from debate.concurrency import run_blocking
from debate.config import VerifierConfig
from debate.errors import InputError, ModelUnavailableError, UsageError
from debate.plugins import TASKS, TaskInput
from debate.results import (
    Aggregator,
    BatchSummary,
    ErrorRecord,
    Record,
    count_pending,
    fails_on,
    read_records,
    refuse_other_finished,
    run_batch,
    settle_batch,
    transient_failure,
    write_refchecker,
)

if TYPE_CHECKING:
    from debate.pipeline import Verifier

__all__ = ["BatchPaths", "BatchProgress", "register"]


def register(sub: Subcommands) -> None:
    """Add `debate verify` to the `debate` parser's subcommands."""
    parser = add_command(
        sub,
        "verify",
        run,
        help="verify a response (or a JSONL batch of them)",
        description="Verify one response (--answer) or a JSONL batch (--input/--output) and print the report.",
        epilog=examples(
            "# one QA answer against its knowledge (text, or @FILE to read a file)",
            'debate verify --question "Who wrote Hamlet?" --answer "Christopher Marlowe" --evidence @knowledge.txt',
            "# a summary against its source document, only the claims table",
            "debate verify --task summarization --response @summary.txt --reference @article.txt --brief",
            "# a batch on your own endpoint; exit 3 when an answer is judged non-factual (CI gating)",
            "debate verify --input answers.jsonl --output verdicts.jsonl --model.base-url http://localhost:8000/v1 "
            "--fail-on non-factual",
            extra=EXIT_CODES,
        ),
    )
    parser.add_argument(
        "--task",
        choices=TASKS.names(),
        default="qa",
        help="; ".join(f"{name}: {TASKS.describe(name).rstrip('.')}" for name in TASKS.names()) + " (default: qa)",
    )
    _one_response_options(parser)
    _batch_options(parser)
    _gate_options(parser)
    add_verifier_arguments(parser)
    add_cost_arguments(parser)
    shown = parser.add_argument_group("output")
    shown.add_argument("--json", action="store_true", help="print the Report as JSON")
    shown.add_argument(
        "--brief", action="store_true", help="only the verdict and the claims summary (no evidence, chain or opinions)"
    )
    shown.add_argument(
        "--show-prompts", action="store_true", help="print the exact messages each agent was sent, turn by turn"
    )
    mark_brief(
        parser,
        {
            "--task": f"{', '.join(TASKS.names())} (default: qa)",
            "--question": None,
            "--answer": None,
            "--evidence": None,
            "--input": None,
            "--output": None,
            "--config": "a TOML file of settings (`debate config show` prints them)",
            "--fail-on": "exit 3 when a verdict is non-factual, unverifiable or either",
            "--estimate": "expected calls, tokens and cost, without calling the model",
            "--json": None,
            "--help-all": "every option, grouped, with its default",
        },
    )


def _gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        choices=["non-factual", "unverifiable", "any"],
        default=None,
        help="exit 3 when a verdict is non-factual, unverifiable, or either (for CI gating; default: off)",
    )
    parser.add_argument(
        "--tolerate-unchecked",
        action="store_true",
        help="a batch: input lines left without a verdict (input errors, failed or unfinished items) do not fail "
        "the run (default: they exit 5; a batch that verified no line exits 5 whatever this says)",
    )


def _one_response_options(parser: argparse.ArgumentParser) -> None:
    single = parser.add_argument_group("one response")
    single.add_argument("--question", help="the question, as text or @FILE (dialogue: the dialogue history)")
    single.add_argument("--answer", "--response", dest="answer", help="the response to check, as text or @FILE")
    single.add_argument(
        "--evidence",
        "--reference",
        dest="evidence",
        help="knowledge or source document, as text or @FILE (default: none)",
    )
    single.add_argument(
        "--sources", metavar="FILE", help="task rag: JSON file of {id: text} or [{id, text, parent_id}]"
    )


def _batch_options(parser: argparse.ArgumentParser) -> None:
    batch = parser.add_argument_group("batch")
    batch.add_argument(
        "--input",
        type=Path,
        metavar="JSONL",
        help="JSONL with id, question, response, reference (or RefChecker's JSON array)",
    )
    batch.add_argument("--output", type=Path, metavar="FILE", help="JSONL to append results to (re-running resumes)")
    batch.add_argument(
        "--output-format",
        choices=["jsonl", "refchecker"],
        default="jsonl",
        help="jsonl: one report per line; refchecker: --output is RefChecker's JSON array (each input item with "
        "claims, Y and ys), written when the batch ends, and the resumable results log is --output + '.jsonl' "
        "(default: jsonl)",
    )
    batch.add_argument(
        "--aggregator",
        choices=["strict", "soft", "major"],
        default="soft",
        help="--output-format refchecker: RefChecker's aggregator for Y (default: soft, the share of each label, "
        "as in RefChecker)",
    )
    batch.add_argument(
        "--retry-failed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on a re-run, redo items that failed for a transient reason (endpoint down) and input lines fixed "
        "since (default: on)",
    )
    batch.add_argument(
        "--redo",
        action="store_true",
        help="on a re-run, take changed settings (a changed option or a calibration, sources or prompt file changed "
        "in place): the records made with the old ones are verified again, the old records kept in the log's "
        "history (default: refuse)",
    )
    batch.add_argument(
        "--fresh",
        action="store_true",
        help="start the log over: every record moves to its history (<output>.history.jsonl) and every line is "
        "verified again",
    )
    batch.add_argument(
        "--max-consecutive-failures",
        type=positive_int,
        default=5,
        metavar="N",
        help="stop (exit 1) after N items in a row fail because the endpoint is unavailable (default: 5)",
    )


@dataclass(frozen=True)
class BatchPaths:
    """Where a batch reads and writes: the results log is the output itself, or beside a RefChecker array."""

    input: Path
    output: Path
    output_format: Literal["jsonl", "refchecker"]
    aggregator: Aggregator

    @property
    def results_log(self) -> Path:
        return self.output if self.output_format == "jsonl" else Path(f"{self.output}.jsonl")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BatchPaths:
        """The paths, refused in one line when they cannot work."""
        if args.input is None or args.output is None:
            raise UsageError("batch mode needs both --input and --output")
        if args.answer is not None or args.question is not None or args.evidence is not None:
            raise UsageError("--input/--output cannot be combined with --question/--answer/--evidence")
        check_input(args.input)
        check_output(args.input, args.output)
        if args.max_consecutive_failures < 1:
            raise UsageError("--max-consecutive-failures must be at least 1")
        return cls(args.input, args.output, args.output_format, args.aggregator)

    def write_output_format(self) -> None:
        """The RefChecker array from the results log, when that is the format asked for."""
        if self.output_format != "refchecker":
            return
        rates = write_refchecker(read_records(self.results_log), self.output, self.aggregator)
        shares = ", ".join(f"{label} {'n/a' if rate is None else f'{rate:.3f}'}" for label, rate in rates.rates.items())
        notes = [
            *([f"label shares over the {rates.responses - rates.abstained} responses with claims"]),
            *(
                [
                    f"{rates.unlabelled_claims} claim(s) without a label (a failed check) counted as Neutral, as "
                    "RefChecker's evaluation counts them"
                ]
                if rates.unlabelled_claims
                else []
            ),
            *([f"{rates.excluded} left out: an error"] if rates.excluded else []),
        ]
        out.print(
            f"RefChecker rates over {rates.responses} responses: {shares} ({'; '.join(notes)})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def run(args: argparse.Namespace) -> int:
    """The command: one response, or a batch when --input or --output is given."""
    batch = args.input is not None or args.output is not None
    if args.redo and args.fresh:
        raise UsageError("--fresh verifies every line again, so --redo adds nothing to it: give one of them")
    if args.brief and args.show_prompts:
        raise UsageError("--brief leaves out the turns whose prompts --show-prompts prints: give one of them")
    if args.tolerate_unchecked and not batch:
        raise UsageError("--tolerate-unchecked is for a batch (--input/--output): one response is checked or fails")
    if args.max_cost is not None and not batch and not args.estimate:
        raise UsageError("--max-cost stops a batch between items: give --input and --output")
    # the one item is refused before any endpoint is asked (the model is resolved with the configuration)
    item = None if batch else one_input(args)
    config = _config(args)
    if args.estimate:
        if batch:
            if args.input is None:
                raise UsageError("--estimate of a batch needs an existing --input file")
            check_input(args.input)
        return run_estimate(args, config, item)
    if item is None:
        return run_blocking(_verify_batch(args, config, BatchPaths.from_args(args)))
    return run_blocking(_verify_one(args, config, item))


def _config(args: argparse.Namespace) -> VerifierConfig:
    config = verifier_config(args)
    if args.show_prompts:
        config = config.model_copy(update={"debate": config.debate.model_copy(update={"record_prompts": True})})
    return config


def _model_line(verifier: Verifier, config: VerifierConfig) -> None:
    where = "embedded llama.cpp" if verifier.embedded else config.model.base_url
    team = "".join(
        f"; {role} on {name} ({verifier.runtime.role_models[role].base_url or 'embedded'})"
        for role, name in verifier.runtime.role_labels().items()
    )
    err.print(f"[dim]model: {verifier.client.model_name} ({where}){team}[/]", soft_wrap=True)


async def _verify_one(args: argparse.Namespace, config: VerifierConfig, item: TaskInput) -> int:
    from debate.pipeline import Verifier

    async with Verifier(config=config) as verifier:
        _model_line(verifier, config)
        try:
            report = await verifier.verify(item, task=args.task)
        except InputError as exc:
            raise UsageError(str(exc)) from exc
        prices, endpoints = costs.run_prices(verifier), costs.run_endpoints(verifier)
    err.print(f"[dim]{cost_line(report.usage_by_model(), prices, endpoints)}[/]")
    if args.json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        render_report(report, out, brief=args.brief, show_prompts=args.show_prompts, next_step=True)
    transient = transient_failure(report)
    if transient is not None:
        raise ModelUnavailableError(f"the endpoint is unavailable ({transient.message}); no verdict was reached")
    return 3 if fails_on(report.verdict, args.fail_on) else 0


async def _verify_batch(args: argparse.Namespace, config: VerifierConfig, paths: BatchPaths) -> int:
    from debate.pipeline import Verifier

    config_json = config.model_dump(mode="json")
    if not args.redo and not args.fresh:
        # records made with other settings (judged without starting the model) are refused before any endpoint
        # is asked, whatever is left to do
        refuse_other_finished(paths.results_log, args.task, config_json)
    todo, done = count_pending(
        paths.input,
        paths.results_log,
        retry_failed=args.retry_failed,
        task=args.task,
        config=config_json if args.redo else None,
    )
    if todo == 0 and not args.fresh:
        # Nothing to verify: no model is started and no endpoint is asked. Labels and fields edited since are
        # updated, records whose line is gone retired to the history.
        summary = settle_batch(paths.input, paths.results_log, retry_failed=args.retry_failed, fail_on=args.fail_on)
        summary.skipped_done = done
        paths.write_output_format()
        print(done_line(summary, paths.output, written=False), file=sys.stderr)
        return gate_exit(args, summary)
    on_interrupt(kept_records(paths.results_log))
    async with Verifier(config=config) as verifier:
        _model_line(verifier, config)
        prices, endpoints = costs.run_prices(verifier), costs.run_endpoints(verifier)
        gate = cost_gate(args, config, verifier)
        summary = await _run_batch(verifier, args, paths, gate)
    paths.write_output_format()
    print(done_line(summary, paths.output), file=sys.stderr)
    return batch_exit(args, summary, prices, endpoints)


class BatchProgress(logging.Handler):
    """Verdict counts and retries for the progress bar: a logging handler on the retry logger counts retries
    (their warnings are printed above the bar by the console's handler, not through it)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.verdicts: dict[str, int] = {}
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.retries += 1

    def add(self, record: Record) -> None:
        verdict = "error" if isinstance(record, ErrorRecord) else record.verdict
        self.verdicts[verdict] = self.verdicts.get(verdict, 0) + 1

    def text(self) -> str:
        counts = " ".join(f"{name} {n}" for name, n in sorted(self.verdicts.items()))
        return counts + (f"  retries {self.retries}" if self.retries else "")


async def _run_batch(
    verifier: Verifier, args: argparse.Namespace, paths: BatchPaths, gate: CostGate | None
) -> BatchSummary:
    with paths.input.open("rb") as fh:
        total = sum(1 for line in fh if line.strip())
    progress = progress_bar(TextColumn("[progress.description]{task.description}"), TextColumn("{task.fields[counts]}"))
    counter = BatchProgress()
    retry_log = logging.getLogger("debate.retry")
    retry_log.addHandler(counter)
    try:
        with progress:
            task = progress.add_task("verifying", total=total, counts="")

            def advance(record: Record) -> None:
                counter.add(record)
                progress.update(task, advance=1, counts=counter.text())

            summary = await run_batch(
                verifier=verifier,
                input_path=paths.input,
                output_path=paths.results_log,
                items_in_flight=items_in_flight(args, verifier.config),
                workers=args.workers,
                task=args.task,
                retry_failed=args.retry_failed,
                max_consecutive_failures=args.max_consecutive_failures,
                fail_on=args.fail_on,
                on_record=advance,
                gate=gate,
                redo=args.redo,
                fresh=args.fresh,
            )
            progress.update(task, completed=summary.processed + summary.skipped_done)
    finally:
        retry_log.removeHandler(counter)
    return summary
