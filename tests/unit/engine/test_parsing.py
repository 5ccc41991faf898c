from __future__ import annotations

import pytest

from debate.calls import parse_opinion
from debate.errors import ReplyUnusableError
from debate.types import Opinion


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"opinion": "ok", "factuality": true, "Error severity": 0}',
            Opinion(opinion="ok", factuality=True, error_severity=0),
        ),
        (
            '{"opinion": "bad", "factuality": false, "error_severity": 4}',
            Opinion(opinion="bad", factuality=False, error_severity=4),
        ),
        (
            'Sure!\n```json\n{"Opinion": "x", "Factuality": "True", "Error Severity": "3"}\n```',
            Opinion(opinion="x", factuality=True, error_severity=3),
        ),
        (
            '{"opinion": "x", "factuality": False, "Error severity": 2,}',
            Opinion(opinion="x", factuality=False, error_severity=2),
        ),
        (
            "{'opinion': 'it is {not} right', 'factuality': False, 'Error severity': 5}",
            Opinion(opinion="it is {not} right", factuality=False, error_severity=5),
        ),
        (
            '{"opinion": "says \\"True\\" here", "factuality": "no", "error-severity": 1.0}',
            Opinion(opinion='says "True" here', factuality=False, error_severity=1),
        ),
        (
            'preamble {"opinion": "a } b", "factuality": true, "Error severity": "2/5"} trailing',
            Opinion(opinion="a } b", factuality=True, error_severity=2),
        ),
        (  # a raw newline and tab inside the string, as llama.cpp's JSON grammar lets a model write them
            '{"opinion": "first line\nsecond\tline", "factuality": true, "Error severity": 0}',
            Opinion(opinion="first line\nsecond\tline", factuality=True, error_severity=0),
        ),
    ],
)
def test_tolerant_of_format(text: str, expected: Opinion) -> None:
    assert parse_opinion(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("The claim is false.", "no JSON object"),
        ('{"opinion": "x", "factuality": true}', 'lacks "Error severity"'),
        ('{"factuality": true, "Error severity": 1}', 'lacks "opinion"'),
        ('{"opinion": "x", "factuality": "partly", "Error severity": 1}', "must be true or false"),
        ('{"opinion": "x", "factuality": null, "Error severity": 1}', "must be true or false"),
        ('{"opinion": "x", "factuality": true, "Error severity": 7}', "between 0 and 5"),
        ('{"opinion": "x", "factuality": true, "Error severity": true}', "integer 0-5"),
        ('{"opinion": "x", "factuality": true, "Error severity": 2.5}', "integer 0-5"),
        ('{"opinion": "  ", "factuality": true, "Error severity": 1}', "non-empty"),
        ('{"opinion": "x", "factuality": true, "Error severity": ', "no JSON object"),
        ('{"opinion": "x" "factuality": true}', "does not parse"),
    ],
)
def test_never_guesses_a_verdict(text: str, message: str) -> None:
    with pytest.raises(ReplyUnusableError, match=message):
        parse_opinion(text)
