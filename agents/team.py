"""The debate of one claim as an autogen-agentchat team.

- Speaker order: a `SelectorGroupChat` whose `selector_func` asks the chain driver (debate.chain) who speaks next,
  from the thread so far; the model-based selector is never used.
- Stop rules: autogen `TerminationCondition`s composed with `&` and `|` (agents.conditions).
- Inputs: each agent builds its input from the thread: exactly its Table-12 inputs (claim, evidence and the
  opinions its role is shown, rendered by debate.inputs), never the whole conversation.
- Transcript: the team's message stream; every turn is a `StructuredMessage[ChainTurn]`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from autogen_agentchat.agents import BaseChatAgent
from autogen_agentchat.base import ChatAgent, Response
from autogen_agentchat.base import Team as AutogenBaseTeam
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StructuredMessage, TextMessage
from autogen_agentchat.teams import SelectorGroupChat
from autogen_core import CancellationToken
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from agents.conditions import paper_termination, turns_in
from agents.model_adapter import DebateModelClient
from debate.chain import ChainDriver, MarkovChain, TurnPlan, TurnRecord, transcript_result
from debate.config import DebateConfig
from debate.errors import DebateError, ModelRequestError
from debate.inputs import render_evidence, render_opinion, render_opinions
from debate.llm import ChatClient
from debate.parsing import (
    OPINION_FORMAT,
    OPINION_FORMAT_THREE_WAY,
    OPINION_SCHEMA,
    OPINION_SCHEMA_THREE_WAY,
    parse_opinion,
)
from debate.prompts import PromptError, PromptTemplate, load_prompt
from debate.structured import ask_structured, call_info
from debate.types import Claim, DebateResult, Evidence, Failure, SentMessage, Turn

__all__ = ["AutogenTeam", "AutogenTeamFactory", "ChainTurn"]

_SEES_VARIABLES: dict[str, set[str]] = {
    "nothing": {"claim", "evidence"},
    "previous": {"claim", "evidence", "previous"},
    "round": {"claim", "evidence", "opinions"},
}


ChainTurn = TurnRecord
"""A turn as it travels in the team's thread."""
TurnMessage = StructuredMessage[TurnRecord]


# --- agents -----------------------------------------------------------------------------------------------------


class _ClaimContext:
    """What the agents of one claim share: the claim, its evidence, the chain driver, an error to re-raise."""

    def __init__(self, claim: Claim, evidence: list[Evidence], driver: ChainDriver, config: DebateConfig,
                 reask: PromptTemplate) -> None:  # fmt: skip
        self.claim = claim
        self.evidence = evidence
        self.rendered_evidence = render_evidence(evidence)
        self.driver = driver
        self.config = config
        self.reask = reask
        self.raise_after: Exception | None = None


_ROLES = {SystemMessage: "system", UserMessage: "user", AssistantMessage: "assistant"}


class _AgentConversation:
    """An agent's model context for one turn: its Table-12 input, then only its own re-asks."""

    def __init__(self, model: DebateModelClient, system: str, *, site: str, source: str) -> None:
        self._model = model
        self._history: list[LLMMessage] = [SystemMessage(content=system)]
        self._site = site
        self._source = source
        self._sent = 0

    async def send(self, text: str) -> str:
        self._history.append(UserMessage(content=text, source="moderator"))
        self._sent += 1
        reply = await self._model.create(self._history, extra_create_args={"site": f"{self._site}#{self._sent}"})
        content = reply.content if isinstance(reply.content, str) else ""
        self._history.append(AssistantMessage(content=content, source=self._source))
        return content

    async def accept(self) -> None:
        await self._model.accept_last()

    def messages(self) -> list[SentMessage]:
        """The exchange so far, exactly as sent and received."""
        return [
            SentMessage.model_validate(
                {"role": _ROLES[type(m)], "content": m.content if isinstance(m.content, str) else str(m.content)}
            )
            for m in self._history
        ]


def _agent_name(role: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in role) + "_agent"


class DebateAgent(BaseChatAgent):
    """One role. It keeps the thread it is shown and speaks from the chain driver's plan for its turn."""

    def __init__(self, role: str, *, prompt: PromptTemplate, client: ChatClient, context: _ClaimContext) -> None:
        super().__init__(name=_agent_name(role), description=f"The {role} agent of the debate.")
        self.role = role
        self._prompt = prompt
        three_way = prompt.not_enough_evidence
        self._expected = OPINION_FORMAT_THREE_WAY if three_way else OPINION_FORMAT
        self._model = DebateModelClient(
            client, response_schema=OPINION_SCHEMA_THREE_WAY if three_way else OPINION_SCHEMA, schema_name="opinion",
            purpose=f"debate:{role}",
        )  # fmt: skip
        self._context = context
        self._thread: list[BaseChatMessage] = []

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        return (TurnMessage,)

    async def on_messages(self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken) -> Response:
        self._thread.extend(messages)
        plan = self._context.driver.next_turn(turns_in(self._thread))
        if plan.role != self.role:
            raise RuntimeError(f"the chain gives this turn to {plan.role}, not {self.role}")  # a selector bug
        task = asyncio.ensure_future(self._speak(plan))
        cancellation_token.link_future(task)
        turn = await task
        content = TurnRecord(
            state=plan.state, round=plan.round, position=plan.position, last_in_state=plan.last_in_state, turn=turn
        )
        message = TurnMessage(content=content, source=self.name)
        self._thread.append(message)
        return Response(chat_message=message)

    def _variables(self, plan: TurnPlan) -> dict[str, str]:
        values = {"claim": self._context.claim.text, "evidence": self._context.rendered_evidence}
        if "previous" in self._prompt.variables:
            values["previous"] = render_opinion(plan.previous[-1].opinion)
        if "opinions" in self._prompt.variables:
            values["opinions"] = render_opinions(plan.previous)
        return values

    async def _speak(self, plan: TurnPlan) -> Turn:
        system, user = self._prompt.render(**self._variables(plan))
        first_call = len(self._model.calls)
        site = f"{self._context.claim.id}:{plan.state}:{plan.round}:{self.role}"
        conversation = _AgentConversation(self._model, system, site=site, source=self.name)

        record = self._context.config.record_prompts

        try:
            outcome = await ask_structured(
                conversation, user, parse_opinion, max_retries=self._context.config.max_parse_retries,
                expected=self._expected, reask=self._context.reask,
            )  # fmt: skip
        except Exception as exc:
            calls = self._model.calls[first_call:]
            info = call_info(self._prompt, calls, max(1, len(calls)), [], conversation.messages() if record else None)
            if isinstance(exc, DebateError) and not (isinstance(exc, ModelRequestError) and exc.fatal):
                return Turn.failed(self.role, Failure.from_error(exc, "debate"), info)
            # A fatal endpoint error or a bug: end the chain, then re-raise it as it was once the team has stopped
            # (raised here, autogen would turn it into a RuntimeError carrying only its text).
            self._context.raise_after = exc
            failure = Failure(kind="model_rejected", message=f"{type(exc).__name__}: {exc}", stage="debate")
            return Turn.failed(self.role, failure, info)
        info = call_info(self._prompt, self._model.calls[first_call:], outcome.attempts, outcome.errors,
                         conversation.messages() if record else None)  # fmt: skip
        if outcome.value is None:
            failure = Failure(kind="reply_unusable", message=outcome.failure or "no usable reply", stage="debate")
            return Turn.failed(self.role, failure, info)
        return Turn.from_opinion(self.role, outcome.value, info)

    async def on_reset(self, cancellation_token: CancellationToken) -> None:
        self._thread.clear()


# --- team -------------------------------------------------------------------------------------------------------


class AutogenTeam:
    """The agents of one claim, run as a SelectorGroupChat over the chain (implements debate.stages.Team)."""

    def __init__(self, *, client: ChatClient, config: DebateConfig, chain: MarkovChain,
                 prompts: Mapping[str, PromptTemplate], reask: PromptTemplate) -> None:  # fmt: skip
        self._client = client
        self._config = config
        self._chain = chain
        self._driver = ChainDriver(chain)
        self._prompts = prompts
        self._reask = reask

    def _selector(self, thread: Sequence[BaseAgentEvent | BaseChatMessage]) -> str:
        return _agent_name(self._driver.next_turn(turns_in(thread)).role)

    async def debate(self, claim: Claim, evidence: Sequence[Evidence]) -> DebateResult:
        context = _ClaimContext(claim, list(evidence), self._driver, self._config, self._reask)
        agents: list[ChatAgent | AutogenBaseTeam] = [
            DebateAgent(role, prompt=self._prompts[role], client=self._client, context=context)
            for role in self._chain.spec.all_roles()
        ]
        config = self._config
        team = SelectorGroupChat(
            agents,
            # Never called: the selector function always names the next speaker.
            model_client=DebateModelClient(self._client, purpose="selector"),
            selector_func=self._selector,
            allow_repeated_speaker=True,
            termination_condition=paper_termination(min_rounds=config.min_rounds, max_rounds=config.max_rounds),
            # A safety net only: the rounds condition stops the chain first.
            max_turns=1 + (config.max_rounds + 1) * max(len(r) for r in self._chain.spec.states.values()),
            custom_message_types=[TurnMessage],
        )
        token = CancellationToken()
        run = asyncio.ensure_future(team.run(task=TextMessage(content=claim.text, source="moderator"),
                                             cancellation_token=token))  # fmt: skip
        try:
            result = await asyncio.shield(run)
        except asyncio.CancelledError:
            # Stop the agents' in-flight model calls, let the team's runtime wind down, then keep cancelling.
            token.cancel()
            await asyncio.wait([run])
            raise
        if context.raise_after is not None:
            raise context.raise_after
        return transcript_result(turns_in(result.messages))


class AutogenTeamFactory:
    """Loads and checks each role's prompt once (per chain); makes a fresh AutogenTeam per claim."""

    def __init__(self, *, prompts_dir: str | None = None) -> None:
        self._prompts_dir = prompts_dir
        self._cache: dict[str, PromptTemplate] = {}
        self._reask = load_prompt("reask", prompts_dir)

    def _prompt(self, chain: MarkovChain, role: str) -> PromptTemplate:
        spec = chain.spec.role(role)
        name = spec.prompt
        if name.endswith(".toml") and chain.spec.source is not None and not name.startswith("/"):
            name = str(Path(chain.spec.source).parent / name)
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

    def _prompts(self, chain: MarkovChain) -> dict[str, PromptTemplate]:
        return {role: self._prompt(chain, role) for role in chain.spec.all_roles()}

    def new_team(self, *, client: ChatClient, config: DebateConfig, chain: MarkovChain) -> AutogenTeam:
        return AutogenTeam(client=client, config=config, chain=chain, prompts=self._prompts(chain), reask=self._reask)

    def prompt_hashes(self, chain: MarkovChain) -> dict[str, str]:
        return {p.name: p.sha256 for p in [*self._prompts(chain).values(), self._reask]}
