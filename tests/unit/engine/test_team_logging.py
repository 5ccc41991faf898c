"""A stopped debate (a worker's SIGTERM, a cancelled audit) is no error: autogen_core logs the CancelledError of the
message it was handling as "Error processing publish message" with a traceback (issue 73 saw it as an ERROR line in
a worker's log on every stop); the team's filter drops exactly that record and lets every other error through."""

from __future__ import annotations

import asyncio
import logging

import pytest

import agents.team  # noqa: F401  (installs the filter on autogen_core's logger)


def _log(exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        logging.getLogger("autogen_core").error("Error processing publish message for x", exc_info=True)


def test_a_cancelled_debate_logs_no_error_and_a_real_error_still_does(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="autogen_core"):
        _log(asyncio.CancelledError())
        assert not caplog.records
        _log(RuntimeError("a real failure"))
    assert len(caplog.records) == 1 and "a real failure" in caplog.text
