"""What a chat request gives the guard: generated bodies (any JSON, any script, NUL, surrogates) are read or refused
naming the field; the two documented ways of sending sources; the body forwarded without `sources`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from markov_debate.guard.sources import MAX_SOURCES, GuardRequestError, read_request
from tests.support.properties import Reached, examples

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "developer", "x"]), "content": _JSON}
)


@settings(
    max_examples=examples(3, why="a pure function, well under a millisecond an example"),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    body=st.one_of(
        _JSON,
        st.fixed_dictionaries(
            {"messages": st.lists(_MESSAGE, max_size=4)},
            optional={"sources": _JSON, "stream": st.one_of(st.booleans(), _JSON)},
        ),
    )
)
@example(body={"messages": [{"role": "system", "content": "[a] x\x00y \ud800"}]})
@example(body={"messages": [{"role": "user", "content": "q"}], "sources": [{"id": "a", "text": 5}]})
def test_any_body_is_read_or_refused_naming_the_field(body: Any, reached: Reached) -> None:
    reached.require(read=0.05, refused=0.05)
    try:
        text = read_request(body)
    except GuardRequestError as exc:
        reached("refused")
        assert exc.param and str(exc).startswith(exc.param) and "\n" not in exc.param
        return
    reached("read")
    assert "sources" not in text.forwarded and text.forwarded["messages"] == body["messages"]
    assert text.forwarded.get("stream") in (None, True, False)  # the guard reads it as the upstream will
    assert len({s.id for s in text.sources}) == len(text.sources) <= MAX_SOURCES
    assert all(s.text.strip() for s in text.sources)
    assert (text.origin == "none") == (not text.sources)


def test_the_two_documented_ways_and_the_field_wins() -> None:
    system = "Use the passages.\n[doc-1] Paris is the capital\nof France.\n[doc-2] The Seine flows through Paris."
    messages = [
        {"role": "system", "content": system},
        {"role": "tool", "tool_call_id": "call_7", "content": "Lyon is in France."},
        {"role": "user", "content": [{"type": "text", "text": "Capital?"}, {"type": "image_url", "image_url": {}}]},
    ]
    text = read_request({"model": "m", "messages": messages})
    assert [(s.id, s.text) for s in text.sources] == [
        ("doc-1", "Paris is the capital\nof France."),
        ("doc-2", "The Seine flows through Paris."),
        ("call_7", "Lyon is in France."),
    ]
    assert (text.origin, text.question) == ("messages", "Capital?")
    given = read_request({"messages": messages, "sources": {"s1": "Only this."}})
    assert [(s.id, s.text) for s in given.sources] == [("s1", "Only this.")] and given.origin == "field"
    assert "sources" not in given.forwarded and json.dumps(given.forwarded)


@pytest.mark.parametrize(
    ("sources", "param"),
    [
        ("Paris", "sources"),
        ([1], "sources[0]"),
        ([{"id": "", "text": "x"}], "sources[0].id"),
        ([{"id": "a", "text": None}], "sources[0].text"),
        ([{"id": "a", "text": "x", "parent_id": 3}], "sources[0].parent_id"),
    ],
)
def test_malformed_sources_name_the_field(sources: Any, param: str) -> None:
    with pytest.raises(GuardRequestError) as caught:
        read_request({"messages": [{"role": "user", "content": "q"}], "sources": sources})
    assert caught.value.param == param


@pytest.mark.parametrize("stream", ["yes", 1, "true", [], {}])
def test_a_stream_flag_that_is_not_a_boolean_is_refused_naming_it(stream: Any) -> None:
    """Issue 73: `"stream": "yes"` went upstream unchecked, answered 502 after 5.7 s."""
    with pytest.raises(GuardRequestError) as caught:
        read_request({"messages": [{"role": "user", "content": "q"}], "stream": stream})
    assert caught.value.param == "stream" and "true or false" in str(caught.value)


def test_repeated_ids_and_too_many_sources_are_said() -> None:
    many = [{"id": f"s{n % (MAX_SOURCES + 5)}", "text": "x"} for n in range(MAX_SOURCES + 10)]
    text = read_request({"messages": [{"role": "user", "content": "q"}], "sources": many})
    assert len(text.sources) == MAX_SOURCES
    assert any("repeat an earlier id" in n for n in text.notes) and any("the first 200" in n for n in text.notes)
