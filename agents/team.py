"""The debate of one claim as an autogen-agentchat team.

- Speaker order: a `SelectorGroupChat` whose `selector_func` asks the chain driver (debate.engine) who speaks next,
  from the thread so far; the model-based selector is never used.
- Stop rules: autogen `TerminationCondition`s composed with `&` and `|` (agents.conditions).
- Turn plans: the selector function computes each turn's plan once (who, which state and round, the opinions shown)
  and the named agent reads it; agents keep no thread.
- Inputs: exactly the role's Table-12 inputs (claim, evidence and the opinions its role is shown, rendered by
  debate.engine), never the whole conversation; each turn is one `debate.engine` exchange (re-asks included).
- Transcript: the team's message stream; every turn is a `StructuredMessage[ChainTurn]`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from autogen_agentchat.agents import BaseChatAgent
from autogen_agentchat.base import ChatAgent, Response, TerminationCondition
from autogen_agentchat.base import Team as AutogenBaseTeam
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StructuredMessage, TextMessage
from autogen_agentchat.teams import SelectorGroupChat
from autogen_core import CancellationToken

from agents.conditions import Checked, paper_termination, posterior_termination, turns_in
from agents.selector_model import NoSelectorModel
from debate import telemetry
from debate.calibration import load_calibration
from debate.calls import (
    OPINION_FORMAT,
    OPINION_FORMAT_THREE_WAY,
    OPINION_SCHEMA,
    OPINION_SCHEMA_THREE_WAY,
    PromptError,
    PromptTemplate,
    ask_structured,
    converse,
    load_prompt,
    parse_opinion,
)
from debate.config import DebateConfig
from debate.engine import (
    ChainDriver,
    Governor,
    StopCheck,
    TurnPlan,
    TurnRecord,
    governed_result,
    render_evidence,
    render_opinion,
    render_opinions,
    result_records,
    transcript_result,
)
from debate.errors import DebateError, InternalError, is_fatal
from debate.llm import ChatClient
from debate.plugins import Chain
from debate.types import Claim, DebateResult, Evidence, Failure, Turn

__all__ = ["AutogenTeam", "AutogenTeamFactory", "ChainTurn"]

_SEES_VARIABLES: dict[str, set[str]] = {
    "nothing": {"claim", "evidence"},
    "previous": {"claim", "evidence", "previous"},
    "round": {"claim", "evidence", "opinions"},
}


class _CancelledIsNoError(logging.Filter):
    """autogen_core logs "Error processing publish message" with a CancelledError when a debate is stopped (a
    worker's SIGTERM, a cancelled audit): a stop asked for, not an error, so it is no ERROR line with a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


logging.getLogger("autogen_core").addFilter(_CancelledIsNoError())

ChainTurn = TurnRecord
"""A turn as it travels in the team's thread."""
TurnMessage = StructuredMessage[TurnRecord]


# --- agents -----------------------------------------------------------------------------------------------------


class _ClaimRun:
    """What the agents of one claim share: the claim, its evidence, the plan of the turn the selector just gave,
    and the future that ends the run early on an error no claim can get past."""

    def __init__(
        self, claim: Claim, evidence: list[Evidence], driver: ChainDriver, config: DebateConfig, reask: PromptTemplate
    ) -> None:
        self.claim = claim
        self.rendered_evidence = render_evidence(evidence)
        self.driver = driver
        self.config = config
        self.reask = reask
        self._plan: TurnPlan | None = None
        self.rounds = telemetry.SpanGroup()
        """The debate's round spans (each turn runs in a task of its own)."""
        self.aborted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Set to a fatal endpoint error or a bug; the team races it against the run. Raised inside autogen, such an
        error would reach the caller as a RuntimeError carrying only its text."""

    def select(self, thread: Sequence[BaseAgentEvent | BaseChatMessage]) -> str:
        """The selector function: the chain's plan for the next turn, computed once; the agent reads it."""
        self._plan = self.driver.next_turn(turns_in(thread))
        return _agent_name(self._plan.role)

    def take_plan(self, role: str) -> TurnPlan:
        plan, self._plan = self._plan, None
        if plan is None or plan.role != role:
            # Only a selector bug gets here: autogen asks the agent the selector function named.
            raise InternalError(f"{role} was asked to speak without the chain's plan for it (plan: {plan})")
        return plan

    def abort(self, error: Exception) -> None:
        if not self.aborted.done():
            self.aborted.set_exception(error)


def _turn_attributes(turn: Turn) -> dict[str, Any]:
    if turn.opinion is None:
        return {"output.value": f"failed: {turn.failure.message if turn.failure else turn.error or 'no opinion'}"}
    return {
        "output.value": turn.opinion,
        "debate.factuality": turn.factuality,
        "debate.error_severity": turn.error_severity,
    }


def _agent_name(role: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in role) + "_agent"


class DebateAgent(BaseChatAgent):
    """One role. Each turn is one structured exchange with the model over the claim's Table-12 inputs."""

    def __init__(self, role: str, *, prompt: PromptTemplate, client: ChatClient, run: _ClaimRun) -> None:
        super().__init__(name=_agent_name(role), description=f"The {role} agent of the debate.")
        self.role = role
        self._prompt = prompt
        self._client = client
        three_way = prompt.not_enough_evidence
        self._expected = OPINION_FORMAT_THREE_WAY if three_way else OPINION_FORMAT
        self._schema = OPINION_SCHEMA_THREE_WAY if three_way else OPINION_SCHEMA
        self._run = run

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        return (TurnMessage,)

    async def on_messages(self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken) -> Response:
        plan = self._run.take_plan(self.role)
        task = asyncio.ensure_future(self._speak(plan))
        cancellation_token.link_future(task)
        turn = await task
        content = TurnRecord(
            state=plan.state, round=plan.round, position=plan.position, last_in_state=plan.last_in_state, turn=turn
        )
        return Response(chat_message=TurnMessage(content=content, source=self.name))

    def _variables(self, plan: TurnPlan) -> dict[str, str]:
        values = {"claim": self._run.claim.text, "evidence": self._run.rendered_evidence}
        if "previous" in self._prompt.variables:
            values["previous"] = render_opinion(plan.previous[-1].opinion)
        if "opinions" in self._prompt.variables:
            values["opinions"] = render_opinions(plan.previous)
        return values

    async def _speak(self, plan: TurnPlan) -> Turn:
        group = f"round {plan.round} {plan.state}"
        where = {"debate.state": plan.state, "debate.round": plan.round}
        attributes = {
            **where,
            "debate.role": self.role,
            "debate.position": plan.position,
            "input.value": self._run.claim.text,
        }
        with self._run.rounds.child(group, where, f"turn {self.role}", "AGENT", attributes) as current:
            turn = await self._turn(plan)
            telemetry.set_attributes(current, _turn_attributes(turn))
            return turn

    async def _turn(self, plan: TurnPlan) -> Turn:
        system, user = self._prompt.render(**self._variables(plan))
        conversation = converse(
            self._client,
            system,
            schema=self._schema,
            schema_name="opinion",
            purpose=f"debate:{self.role}",
            site=f"{self._run.claim.id}:{plan.state}:{plan.round}:{self.role}",
        )
        config = self._run.config
        try:
            outcome = await ask_structured(
                conversation,
                user,
                parse_opinion,
                max_retries=config.max_parse_retries,
                expected=self._expected,
                reask=self._run.reask,
            )
        except Exception as exc:
            info = conversation.info(self._prompt, conversation.messages() if config.record_prompts else None)
            if isinstance(exc, DebateError) and not is_fatal(exc):
                return Turn.failed(self.role, Failure.from_error(exc, "debate"), info)
            self._run.abort(exc)
            failure = Failure(kind="model_rejected", message=f"{type(exc).__name__}: {exc}", stage="debate")
            return Turn.failed(self.role, failure, info)
        info = outcome.info(self._prompt, conversation.messages() if config.record_prompts else None)
        if outcome.value is None:
            failure = Failure(kind="reply_unusable", message=outcome.failure or "no usable reply", stage="debate")
            return Turn.failed(self.role, failure, info)
        return Turn.from_opinion(self.role, outcome.value, info)

    async def on_reset(self, cancellation_token: CancellationToken) -> None:
        """Nothing to forget: an agent keeps no thread, it reads its turn's plan."""


# --- team -------------------------------------------------------------------------------------------------------


class AutogenTeam:
    """The agents of one claim, run as a SelectorGroupChat over the chain (implements debate.plugins.Team)."""

    def __init__(
        self,
        *,
        client: ChatClient,
        config: DebateConfig,
        chain: Chain,
        prompts: Mapping[str, PromptTemplate],
        reask: PromptTemplate,
    ) -> None:
        self._client = client
        self._config = config
        self._chain = chain
        self._driver = ChainDriver(chain)
        self._prompts = prompts
        self._reask = reask

    def _group_chat(
        self, run: _ClaimRun, termination: TerminationCondition | None = None, max_rounds: int | None = None
    ) -> SelectorGroupChat:
        agents: list[ChatAgent | AutogenBaseTeam] = [
            DebateAgent(role, prompt=self._prompts[role], client=self._client, run=run)
            for role in self._chain.spec.all_roles()
        ]
        rounds = self._config.max_rounds if max_rounds is None else max_rounds
        return SelectorGroupChat(
            agents,
            model_client=NoSelectorModel(),
            selector_func=run.select,
            allow_repeated_speaker=True,
            termination_condition=termination or self._termination(),
            # A safety net only: the rounds condition stops the chain first.
            max_turns=1 + (rounds + 1) * max(len(r) for r in self._chain.spec.states.values()),
            custom_message_types=[TurnMessage],
        )

    def _termination(self) -> TerminationCondition:
        config = self._config
        if config.threshold is None or config.calibration is None:
            return paper_termination(min_rounds=config.min_rounds, max_rounds=config.max_rounds)
        governor = load_calibration(config.calibration).governor(config.prior)
        return posterior_termination(governor, self._chain, threshold=config.threshold, max_rounds=config.max_rounds)

    def _result(self, records: list[TurnRecord]) -> DebateResult:
        result = transcript_result(records)
        config = self._config
        if config.threshold is None or config.calibration is None:
            return result
        p = load_calibration(config.calibration).governor(config.prior).p_debate(self._chain, records)
        return governed_result(result, p, config.threshold)

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> DebateResult:
        run = _ClaimRun(claim, list(evidence), self._driver, self._config, self._reask)
        records = await self._run(run, self._group_chat(run), [])
        return self._result(records)

    async def continue_debate(
        self,
        claim: Claim,
        evidence: Sequence[Evidence],
        earlier: DebateResult,
        *,
        governor: Governor,
        threshold: float,
        max_rounds: int,
        until: StopCheck | None = None,
    ) -> DebateResult:
        """See debate.plugins.ContinuingTeam: the earlier turns enter the thread as the task's messages, so the
        chain's driver plans this team's first turn from them and the stop conditions read them."""
        run = _ClaimRun(claim, list(evidence), self._driver, self._config, self._reask)
        earlier_records = result_records(earlier, self._chain)
        termination = posterior_termination(governor, self._chain, threshold=threshold, max_rounds=max_rounds)
        if until is not None:
            termination = termination | Checked(until)
        records = await self._run(run, self._group_chat(run, termination, max_rounds), earlier_records)
        return governed_result(transcript_result(records), governor.p_debate(self._chain, records), threshold)

    async def _run(self, run: _ClaimRun, chat: SelectorGroupChat, earlier: list[TurnRecord]) -> list[TurnRecord]:
        token = CancellationToken()
        opening = TextMessage(content=run.claim.text, source="moderator")
        said = [TurnMessage(content=r, source=_agent_name(r.turn.role)) for r in earlier]
        task: list[BaseChatMessage] = [opening, *said]
        team_run = asyncio.ensure_future(chat.run(task=task if earlier else opening, cancellation_token=token))
        try:
            waiters: list[asyncio.Future[Any]] = [team_run, run.aborted]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Cancelled from outside, or aborted by an agent: stop the agents' in-flight model calls and let the
            # team's runtime wind down before going on.
            if not team_run.done():
                token.cancel()
                await asyncio.wait([team_run])
        run.rounds.close()
        if run.aborted.done():
            run.aborted.result()
        records = turns_in(team_run.result().messages)
        # The task's messages come back at the head of the result; a version that left them out gets them here.
        return records if records[: len(earlier)] == earlier else [*earlier, *records]


class AutogenTeamFactory:
    """Loads and checks each role's prompt once (per chain); makes a fresh AutogenTeam per claim."""

    def __init__(self, *, prompts_dir: str | None = None) -> None:
        self._prompts_dir = prompts_dir
        self._cache: dict[str, PromptTemplate] = {}
        self._reask = load_prompt("reask", prompts_dir)

    def _prompt(self, chain: Chain, role: str) -> PromptTemplate:
        spec = chain.spec.role(role)
        name = chain.spec.prompt_name(role)
        if name not in self._cache:
            prompt = load_prompt(name, self._prompts_dir)
            expected = _SEES_VARIABLES[spec.sees]
            if set(prompt.variables) != expected:
                raise PromptError(
                    f"prompt {prompt.name!r} (role {role}, sees {spec.sees}) declares {sorted(prompt.variables)}; "
                    f"the agent supplies {sorted(expected)}"
                )
            self._cache[name] = prompt
        return self._cache[name]

    def _prompts(self, chain: Chain) -> dict[str, PromptTemplate]:
        return {role: self._prompt(chain, role) for role in chain.spec.all_roles()}

    def new_team(self, *, client: ChatClient, config: DebateConfig, chain: Chain) -> AutogenTeam:
        return AutogenTeam(client=client, config=config, chain=chain, prompts=self._prompts(chain), reask=self._reask)

    def prompt_hashes(self, chain: Chain) -> dict[str, str]:
        return {p.name: p.sha256 for p in [*self._prompts(chain).values(), self._reask]}
