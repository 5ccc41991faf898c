"""The four debate roles as autogen-agentchat agents, each with its prompt file, fresh for every claim."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken

from agents.model_adapter import DebateModelClient
from debate.config import DebateConfig
from debate.llm import ChatClient, ModelError, ModelRequestError
from debate.parsing import OPINION_FORMAT, OPINION_SCHEMA, parse_opinion
from debate.prompts import PromptError, PromptTemplate, load_prompt
from debate.runner import TurnRequest
from debate.structured import ask_structured, call_info
from debate.types import Evidence, Opinion, Role, Turn

__all__ = ["AutogenTeam", "AutogenTeamFactory", "render_evidence", "render_opinion"]

_ROLE_VARIABLES: dict[Role, set[str]] = {
    "initial": {"claim", "evidence"},
    "trust": {"claim", "evidence", "previous"},
    "skeptic": {"claim", "evidence", "previous"},
    "leader": {"claim", "evidence", "first_role", "first_response", "second_role", "second_response"},
}
_ROLE_TITLES: dict[Role, str] = {"initial": "initial", "trust": "Trust", "skeptic": "Skeptic", "leader": "Leader"}


def render_evidence(evidence: Sequence[Evidence]) -> str:
    """Numbered evidence items; an explicit note when there is none, so the model knows it is on its own."""
    if not evidence:
        return "(no evidence was given: judge from well-established knowledge and say so)"
    return "\n".join(f"[{i}] {item.text}" for i, item in enumerate(evidence, start=1))


def render_opinion(opinion: Opinion) -> str:
    """An opinion in the paper's reply format, as the next agent sees it."""
    return json.dumps(
        {"opinion": opinion.opinion, "factuality": opinion.factuality, "Error severity": opinion.error_severity},
        ensure_ascii=False,
    )


def _variables(request: TurnRequest) -> dict[str, str]:
    values = {"claim": request.claim.text, "evidence": render_evidence(request.evidence)}
    if request.role == "leader":
        if len(request.previous) != 2:
            raise ValueError(f"the leader needs the two earlier opinions of its round, got {len(request.previous)}")
        first, second = request.previous
        values |= {
            "first_role": _ROLE_TITLES[first.role],
            "first_response": render_opinion(first.opinion),
            "second_role": _ROLE_TITLES[second.role],
            "second_response": render_opinion(second.opinion),
        }
    elif request.role != "initial":
        if len(request.previous) != 1:
            raise ValueError(f"the {request.role} agent needs one previous opinion, got {len(request.previous)}")
        values["previous"] = render_opinion(request.previous[0].opinion)
    return values


class AutogenTeam:
    """Initial, Trust, Skeptic and Leader agents for one claim (implements debate.runner.AgentTeam)."""

    def __init__(
        self, *, client: ChatClient, config: DebateConfig, prompts: Mapping[Role, PromptTemplate], reask: PromptTemplate
    ) -> None:
        self._client = client
        self._config = config
        self._prompts = prompts
        self._reask = reask
        self._agents: dict[Role, tuple[AssistantAgent, DebateModelClient]] = {}

    def _agent(self, role: Role, system: str) -> tuple[AssistantAgent, DebateModelClient]:
        if role not in self._agents:
            adapter = DebateModelClient(self._client, response_schema=OPINION_SCHEMA, schema_name="opinion")
            agent = AssistantAgent(
                name=f"{role}_agent",
                model_client=adapter,
                system_message=system,
                description=f"The {_ROLE_TITLES[role]} agent of the debate.",
            )
            self._agents[role] = (agent, adapter)
        return self._agents[role]

    async def speak(self, request: TurnRequest) -> Turn:
        prompt = self._prompts[request.role]
        system, message = prompt.render(**_variables(request))
        agent, adapter = self._agent(request.role, system)
        token = CancellationToken()
        first_call = len(adapter.calls)

        async def send(text: str) -> str:
            response = await agent.on_messages([TextMessage(content=text, source="moderator")], token)
            return response.chat_message.to_model_text()

        # Each turn sees only its Table-12 inputs; the agent's memory spans just this turn's re-asks.
        await agent.on_reset(token)
        try:
            outcome = await ask_structured(
                send,
                message,
                parse_opinion,
                max_retries=self._config.max_parse_retries,
                expected=OPINION_FORMAT,
                reask=self._reask,
            )
        except ModelError as exc:
            if isinstance(exc, ModelRequestError) and exc.fatal:
                raise
            calls = adapter.calls[first_call:]
            info = call_info(prompt, calls, max(1, len(calls)), [])
            return Turn(role=request.role, error=f"model call failed: {exc}", call=info)
        finally:
            await agent.on_reset(token)
        info = call_info(prompt, adapter.calls[first_call:], outcome.attempts, outcome.errors)
        if outcome.value is None:
            return Turn(role=request.role, error=outcome.failure, call=info)
        return Turn.from_opinion(request.role, outcome.value, info)


class AutogenTeamFactory:
    """Loads and checks the prompt files once; makes a fresh AutogenTeam per claim."""

    def __init__(self, *, prompts_dir: str | None = None) -> None:
        self._prompts: dict[Role, PromptTemplate] = {}
        for role, expected in _ROLE_VARIABLES.items():
            prompt = load_prompt(role, prompts_dir)
            if set(prompt.variables) != expected:
                raise PromptError(
                    f"prompt {role!r} declares {sorted(prompt.variables)}; the {role} agent supplies {sorted(expected)}"
                )
            self._prompts[role] = prompt
        self._reask = load_prompt("reask", prompts_dir)

    def new_team(self, *, client: ChatClient, config: DebateConfig) -> AutogenTeam:
        return AutogenTeam(client=client, config=config, prompts=self._prompts, reask=self._reask)

    def prompt_hashes(self) -> dict[str, str]:
        return {p.name: p.sha256 for p in [*self._prompts.values(), self._reask]}
