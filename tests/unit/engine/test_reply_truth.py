"""The reply parsers return the verdict a reply states, or the parse error; never a guess. Generated replies state a
verdict in every form docs/connect.md lists (JSON booleans, the words, any case, in code fences, after prose, as a
Python dict, under any key spelling) and the parser must return exactly it; replies whose verdict is anything
else must be refused. A reply that states a verdict may still be refused as unreadable (re-asked, never guessed),
but most must be read. test_reply_fuzz.py checks that nothing but the reply error escapes; this checks the value."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.calls import parse_opinion
from debate.errors import ReplyUnusableError
from debate.types import Opinion
from experiments.methods import _parse_factool, halueval_judgement
from tests.support.properties import Reached

_WORDS: dict[str, bool] = {
    "true": True, "yes": True, "factual": True,
    "false": False, "no": False, "non-factual": False, "nonfactual": False, "not factual": False,
}  # fmt: skip
_CASES = st.sampled_from([str.lower, str.upper, str.title, lambda s: f"  {s} "])
STATED = st.one_of(
    st.booleans().map(lambda b: (b, b)),
    st.tuples(st.sampled_from(sorted(_WORDS)), _CASES).map(lambda pair: (pair[1](pair[0]), _WORDS[pair[0]])),
)
NOT_A_VERDICT = st.one_of(
    st.sampled_from(["maybe", "", "unknown", "partly true", "true-ish", "n/a", "1", "0", "si"]),
    st.integers(),
    st.none(),
    st.lists(st.booleans(), max_size=2),
    st.text(max_size=12).filter(lambda s: s.strip().lower() not in _WORDS),
)
# two replies in three state a verdict, the third something else
_VERDICT = st.integers(0, 2).flatmap(lambda k: NOT_A_VERDICT.map(lambda v: (v, None)) if k == 0 else STATED)
_KEYS = {
    "factuality": st.sampled_from(["factuality", "Factuality", " FACTUALITY "]),
    "severity": st.sampled_from(["Error severity", "error_severity", "error-severity", "ERROR SEVERITY"]),
}


def _written(obj: dict[str, Any], form: str, prose: str) -> str:
    text = repr(obj) if form == "python" else json.dumps(obj, ensure_ascii=False)
    if form == "fenced":
        return f"{prose}\n```json\n{text}\n```\n"
    if form == "after prose":
        return f"{prose} {text}"
    return text


_PROSE = st.text(st.characters(exclude_characters="{}"), max_size=40)


def _parsed(
    parse: Callable[[str], Opinion], reply: str, meant: bool | None, form: str, reached: Reached
) -> Opinion | None:
    """The parser's opinion of a reply that states a verdict (None when it is refused, allowed only for a Python
    dict: one with a double quote inside a string is not read; never a guess); a reply that states none must be
    refused."""
    if meant is None:
        reached("refused")
        with pytest.raises(ReplyUnusableError):
            parse(reply)
        return None
    try:
        got = parse(reply)
    except ReplyUnusableError:
        assert form == "python", reply
        reached("unread")
        return None
    reached("read")
    return got


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    verdict=_VERDICT,
    severity=st.integers(0, 5),
    opinion=st.text(min_size=1, max_size=40).filter(str.strip),
    keys=st.fixed_dictionaries(_KEYS),
    form=st.sampled_from(["json", "python", "fenced", "after prose"]),
    prose=_PROSE,
)
def test_an_opinion_is_the_verdict_it_states_or_refused(
    verdict: tuple[Any, bool | None], severity: int, opinion: str, keys: dict[str, str], form: str, prose: str,
    reached: Reached,
) -> None:  # fmt: skip
    reached.require(read=0.1, refused=0.1)
    written, meant = verdict
    reply = _written({"opinion": opinion, keys["factuality"]: written, keys["severity"]: severity}, form, prose)
    got = _parsed(parse_opinion, reply, meant, form, reached)
    if got is not None:
        assert (got.factuality, got.error_severity, got.opinion) == (meant, severity, opinion.strip())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    verdict=_VERDICT | st.just(("absent", None)),
    reasoning=st.text(min_size=1, max_size=30).filter(str.strip),
    form=st.sampled_from(["json", "python", "fenced", "after prose"]),
    prose=_PROSE,
)
def test_a_factool_verdict_is_the_one_it_states_or_refused(
    verdict: tuple[Any, bool | None], reasoning: str, form: str, prose: str, reached: Reached
) -> None:
    reached.require(read=0.1, refused=0.1)
    written, meant = verdict
    obj = {"reasoning": reasoning, "error": "none", "correction": "none"}
    if written != "absent":
        obj["factuality"] = written
    reply = _written(obj, form, prose)
    got = _parsed(_parse_factool, reply, meant, form, reached)
    if got is not None:
        assert got.factuality is meant


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(
        st.sampled_from(["Yes", "No", "Yes.", "No.", "yes", "no", "Y.e.s", "N.o", "Not", "None", "Nothing", " ", "."])
        | st.text(st.characters(codec="ascii"), max_size=8),
        max_size=6,
    )
)
def test_halueval_reads_yes_or_no_as_its_authors_rule_says(parts: list[str], reached: Reached) -> None:
    """HaluEval's evaluate.py, stated again here: periods removed, then "Yes" anywhere (case-sensitive) means
    hallucinated and "No" anywhere means not; both or neither is a failure (None), never a guess."""
    reached.require(hallucinated=0.01, faithful=0.02, failed=0.02)
    reply = " ".join(parts)
    bare = "".join(ch for ch in reply if ch != ".")
    says_yes, says_no = bare.find("Yes") >= 0, bare.find("No") >= 0
    got = halueval_judgement(reply)
    if says_yes and not says_no:
        reached("hallucinated")
        assert got is True
    elif says_no and not says_yes:
        reached("faithful")
        assert got is False
    else:
        reached("failed")
        assert got is None


@pytest.mark.parametrize("word", sorted(_WORDS))
@pytest.mark.parametrize("form", ["json", "python", "fenced", "after prose"])
def test_every_documented_verdict_word_is_read_in_every_form(word: str, form: str) -> None:
    """The whole vocabulary, each word in each case and form (a generated sample may miss one)."""
    for case in (str.lower, str.upper, str.title):
        reply = _written({"opinion": "o", "factuality": case(word), "Error severity": 2}, form, "Here it is:")
        assert parse_opinion(reply).factuality is _WORDS[word], reply
