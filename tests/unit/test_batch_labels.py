"""A batch line's `label_factual`, as `debate dynamics fit` reads it: any JSON value is either a label (a JSON
boolean; a CSV cell's words are tests/unit/pipeline/test_label_forms.py's) or an error naming the field and the
line, never a guess and never text kept and ignored (issue 75: "true" as JSON text was kept so, and the fit
ignored it); and a response's label
says which of its claims it labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debate.results._items import read_input
from experiments.dynamics.observe import claim_labels
from tests.support.properties import Reached

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(  # half the time any JSON, half the words and values a labeller writes
    value=st.integers(0, 1).flatmap(
        lambda k: _JSON if k == 0 else st.sampled_from(["true", "False", " TRUE ", "yes", "0", "1", True, False, None])
    )
)
def test_a_label_is_true_or_false_or_an_error_naming_the_field(
    value: Any, tmp_path_factory: Any, reached: Reached
) -> None:
    reached.require(label=0.01, refused=0.05)
    path = Path(tmp_path_factory.mktemp("labels")) / "batch.jsonl"
    path.write_text(json.dumps({"id": "a", "response": "x", "label_factual": value}) + "\n", encoding="utf-8")
    [work] = list(read_input(path))
    if value is None or isinstance(value, bool):
        reached("label")
        assert work.error is None and work.item is not None and work.raw is not None
        assert work.item.label_factual is value and work.raw["label_factual"] is value  # the record carries it so
    else:
        reached("refused")
        assert work.item is None and work.error is not None
        assert work.error.startswith("line 1: field 'label_factual': ") and "must be true or false" in work.error


@given(label=st.none() | st.booleans(), n=st.integers(min_value=0, max_value=4))
def test_a_responses_label_labels_its_claims_only_where_it_says_which(label: bool | None, n: int) -> None:
    labels = claim_labels(label, n)
    assert len(labels) == n
    if label is True:
        assert labels == [True] * n  # a factual response has only factual claims
    elif label is False and n == 1:
        assert labels == [False]  # its one claim is the wrong one
    else:
        assert labels == [None] * n  # unknown, or a wrong response that does not say which claim
