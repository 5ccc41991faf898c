"""What `--items N` bounds, stated as a property of `ordered_map` (the batch's scheduler): at most N items run at
once, and at most 2 x N are started and not yet handed back (written), since records are written in input order
and finished items wait behind a slower earlier one. A kill -9 therefore redoes at most 2 x N items; docs/cli.md
says so (a reviewer once saw 9 redone with --items 8 and took N for the bound)."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from debate.concurrency import ordered_map


async def _schedule(turns: list[int], limit: int) -> tuple[list[int], int, int]:
    """Run items that each take `turns[i]` event-loop turns; return the results and the most running and the most
    started-but-not-yielded seen at any point."""
    running = started = yielded = 0
    most_running = most_unwritten = 0

    async def work(i: int) -> int:
        nonlocal running, started, most_running, most_unwritten
        running += 1
        started += 1
        most_running = max(most_running, running)
        most_unwritten = max(most_unwritten, started - yielded)
        for _ in range(turns[i]):
            await asyncio.sleep(0)
        running -= 1
        return i

    results: list[int] = []
    async for result in ordered_map(range(len(turns)), work, limit=limit):
        results.append(result)
        yielded += 1
    return results, most_running, most_unwritten


@given(turns=st.lists(st.integers(0, 30), max_size=40), limit=st.integers(1, 8))
def test_items_bounds_running_work_and_twice_it_the_unwritten(turns: list[int], limit: int) -> None:
    results, most_running, most_unwritten = asyncio.run(_schedule(turns, limit))
    assert results == list(range(len(turns)))  # every item once, in input order
    assert most_running <= limit
    assert most_unwritten <= 2 * limit


def test_a_slow_first_item_holds_twice_items_unwritten() -> None:
    """The bound is reached, so docs/cli.md's 2 x --items is the true figure, not a loose one: the first item is
    slow, every other is instant, and 2 x limit items are started before the first is written."""
    limit = 4
    results, most_running, most_unwritten = asyncio.run(_schedule([50] + [0] * 20, limit))
    assert results == list(range(21)) and most_running <= limit
    assert most_unwritten == 2 * limit
