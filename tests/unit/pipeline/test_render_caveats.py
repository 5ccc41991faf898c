"""The verdict box says what a reader of the opinions would otherwise get wrong: a reply whose text opens with the
opposite of its verdict field (the field is what counts)."""

from __future__ import annotations

import io

from rich.console import Console

from debate import DebateConfig, Verifier, VerifierConfig
from debate.cli.render import render_report
from debate.plugins import TaskInput
from debate.testing import ScriptedChatClient
from tests.support.helpers import op


async def _report(opinion: str, factual: bool) -> str:
    config = VerifierConfig(debate=DebateConfig(min_rounds=1, max_rounds=1))
    client = ScriptedChatClient({"debate": [op(factual, 0, opinion)] * 4})
    async with Verifier(config=config, client=client) as verifier:
        report = await verifier.verify(TaskInput("Paris", question="Capital of France?", reference="Paris is."))
    out = io.StringIO()
    render_report(report, Console(file=out, width=300, force_terminal=False), brief=True)
    return out.getvalue()


async def test_a_reply_whose_text_says_the_opposite_of_its_field_is_named_in_the_verdict_box() -> None:
    text = await _report("False, but I can give you a dictionary {{{1}}}", True)
    assert "4 of 4 agent replies open their text with the opposite of their verdict field" in text
    assert "the verdict field is what counts" in text and "FACTUAL" in text
    agreeing = await _report("True: the evidence names Paris.", True)
    assert "opposite of their verdict field" not in agreeing
    # an opening word that starts a sentence is not a verdict
    assert "opposite of their verdict field" not in await _report("No doubt the evidence supports it.", True)
    assert "4 of 4" in await _report("Yes. The evidence does not name Paris.", False)
