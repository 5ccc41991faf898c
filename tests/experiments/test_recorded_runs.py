"""The recorded simulated runs (tests/support/recorded.py) are what the engine does today: a spread of each file's
claims runs through the real engine again and must give the same turns, and each file holds every claim its spec
names. A failure here means the engine's behaviour changed under the recordings: record them again (the command is
in tests/support/recorded.py) and read what changed before trusting the dynamics tests."""

from __future__ import annotations

import pytest

from tests.support.recorded import names, read

pytestmark = pytest.mark.slow  # runs the engine

SPREAD = 40
"""Claims per file run again: every k-th of the run's claims, so the start and the end of the label order are in."""


def test_there_are_recordings_to_check() -> None:
    assert len(names()) >= 20, names()


@pytest.mark.parametrize("name", names())
def test_a_recorded_run_is_what_the_engine_does(name: str) -> None:
    spec, run = read(name)
    labels = spec.labels()
    assert set(run.ends) == set(labels), "the recording's claims are not the ones its spec names"
    assert {o.item for o in run.seen} == set(labels), "claims of the spec with no turn recorded"
    every = max(1, len(labels) // SPREAD)
    some = dict(list(labels.items())[::every])
    again = spec.simulate(some)
    kept = [o for o in run.seen if o.item in some]
    assert again.seen == kept, f"{name}: the engine's turns differ from the recording's; record the runs again"
    assert again.ends == {item: run.ends[item] for item in some}, f"{name}: the debates end otherwise now"
