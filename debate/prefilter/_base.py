"""The defaults a prefilter builds on: subclass BasePrefilter, set `name` (and `Options`), write `check`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict

from debate.plugins import Plan, StageContext
from debate.types import Claim, ClaimVerdict, Evidence, PrefilterDecision, ResponseCheck

__all__ = ["BasePrefilter", "NoOptions"]


class NoOptions(BaseModel):
    """The options of a prefilter that takes none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


OptionsT = TypeVar("OptionsT", bound=BaseModel)


class BasePrefilter(ABC, Generic[OptionsT]):
    """A prefilter with the defaults: no prompts, no response-level check before or after the claims, nothing to
    note. Subclass it with its options model, `class Numbers(BasePrefilter[NumbersOptions])` (`NoOptions` for
    none), set `name`, write `check`, and read the options as `self.options` (`prefilter.options.<name>` in the
    configuration, `--prefilter.options NAME.KEY=VALUE` on the command line, checked against the model when the
    Verifier is built). The class is its own factory: `PREFILTERS.register(name, Numbers)`, or an entry point in
    `markov_debate.prefilters`."""

    name: str
    """The name it is listed under in `prefilter.prefilters` (a class attribute of the subclass)."""
    Options: ClassVar[type[BaseModel] | None] = None
    """Its options model (set from the type argument), or None when it takes no options."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The options model is the class's type argument: declared once, where the type checker sees it too.
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is BasePrefilter and "Options" not in cls.__dict__:
                model = get_args(base)[0]
                if isinstance(model, type) and issubclass(model, BaseModel):
                    cls.Options = None if model is NoOptions else model

    def __init__(self, ctx: StageContext) -> None:
        self.ctx = ctx
        model = self.Options or NoOptions
        self.options: OptionsT = ctx.config.prefilter.options_for(self.name, model)  # type: ignore[assignment]

    def prompt_hashes(self) -> dict[str, str]:
        """The prompt files it sends to the model, by name (recorded with every run): none by default."""
        return {}

    @abstractmethod
    async def check(self, claim: Claim, index: int, evidence: Sequence[Evidence], plan: Plan) -> PrefilterDecision:
        """Decide `claim` (`factual`/`non_factual` ends it without a debate) or let it pass (`pass`)."""

    async def check_response(self, response: str, plan: Plan) -> ResponseCheck | None:
        """Once per response, before its claims: nothing by default."""
        return None

    def summarize(self, verdicts: Sequence[ClaimVerdict], plan: Plan) -> ResponseCheck | None:
        """Once per response, after its claims: nothing by default."""
        return None

    def note(self) -> str | None:
        """What the report should say about this prefilter: nothing by default."""
        return None
