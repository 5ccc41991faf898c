"""What a generated-input property must show besides "nothing crashed": which of its outcomes the generated
examples reached. A property states its outcomes; when the run ends, an outcome it requires that too few examples
reached fails the test, so a property whose accepting branch generated inputs never reach cannot pass unseen
(issue 66: one accepted 0 of 1,000 texts, and its check of accepted values never ran)."""

from __future__ import annotations

from collections import Counter

from hypothesis import event

__all__ = ["Reached", "examples"]


class Reached:
    """Counts the outcome each example reached (`reached("report")`); `require(name, share)` states that at least
    that share of the examples must reach it. Checked once, after the last example (the `reached` fixture)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples = 0
        self.required: dict[str, float] = {}

    def require(self, **shares: float) -> None:
        self.required.update(shares)

    def __call__(self, outcome: str) -> None:
        self.examples += 1
        self.counts[outcome] += 1
        event(outcome)  # `pytest --hypothesis-show-statistics` lists the shares

    def check(self) -> None:
        assert self.examples, "the property ran no example"
        short = {
            name: f"{self.counts[name]} of {self.examples}"
            for name, share in self.required.items()
            if self.counts[name] < max(1, share * self.examples)
        }
        assert not short, f"outcomes too few examples reached (wanted shares {self.required}): {short}"


def examples(share: float, *, why: str) -> int:
    """A property's examples as a share of the profile's (`ci` 100, `long` 800), so both profiles govern every
    property; `why` says why it runs fewer (each example runs a whole command) or more (a pure function) than the
    profile. docs/development.md lists every share in use (a test compares)."""
    from hypothesis import settings

    assert why.strip(), "say why this property runs another share of the profile's examples"
    profile = settings.default
    return max(5, round((profile.max_examples if profile is not None else 100) * share))
