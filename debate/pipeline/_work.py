"""An item's work before the debate, for the estimate: what its task says it needs, and the prefilters' calls."""

from __future__ import annotations

from debate.config import VerifierConfig
from debate.pipeline._range import ZERO, Range
from debate.plugins import PREFILTERS, EstimatesWork, Task, TaskInput, TaskWork

__all__ = ["prefilter_calls", "task_work"]


def task_work(task: Task, item: TaskInput, config: VerifierConfig, notes: set[str]) -> TaskWork:
    """The work `task` expects of `item` (one extraction call and a claim a sentence when it does not say)."""
    if isinstance(task, EstimatesWork):
        return task.expected_work(item, config)
    notes.add(f"task {task.name} does not estimate its work: one extraction call and one claim per sentence assumed")
    from debate.tasks import extraction_work

    return extraction_work(item, config)


def prefilter_calls(claims: float, config: VerifierConfig, notes: set[str]) -> Range:
    """The model calls the configured prefilters make for `claims` claims (each says its own; one that does not is
    counted as none, and said)."""
    total = ZERO
    for name in config.prefilter.prefilters:
        expected_calls = getattr(PREFILTERS.get(name), "expected_calls", None)
        if expected_calls is None:
            notes.add(f"prefilter {name} does not say how many calls it makes: counted as none")
            continue
        low, high = expected_calls(claims, config)
        total = total + Range(expected=high, low=low, high=high)
        decides = getattr(PREFILTERS.get(name), "may_decide", None)
        if decides is None or decides(config):  # a prefilter that does not say may decide
            notes.add("claims a prefilter decides skip their debate: the figures count a debate for every claim")
    return total
