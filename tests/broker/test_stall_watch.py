"""The stall watch on a fake clock: gaps between looks longer than the threshold are stalls."""

import pytest

from broker.log.clock import ManualClock
from broker.quorum.stall_watch import StallWatch


def test_a_gap_longer_than_the_threshold_is_a_stall_counted_once() -> None:
    clock = ManualClock(10_000)
    watch = StallWatch(clock.now_ms, threshold_ms=1000, tick_ms=100)
    for _ in range(20):  # ticks as the loop runs them, a bit late now and then
        clock.advance(150)
        assert watch.observe() == 0
    clock.advance(1000)  # exactly the threshold: no stall
    assert watch.observe() == 0
    clock.advance(5000)
    assert watch.observe() == 1
    assert (watch.stalled_ms, watch.last_end_ms) == (4900, clock.now_ms())
    assert watch.observe() == 1  # the next look, at once, sees no new gap
    clock.advance(2000)
    assert watch.stalled_now() == 4900 + 1900 and watch.stalls == 2


def test_begin_forgets_what_came_before() -> None:
    clock = ManualClock(0)
    watch = StallWatch(clock.now_ms, threshold_ms=1000, tick_ms=100)
    clock.advance(30_000)  # a node's start, before the quorum runs
    watch.begin()
    assert watch.observe() == 0 and watch.stalled_ms == 0


def test_a_clock_that_goes_back_is_no_stall() -> None:
    clock = ManualClock(5000)
    watch = StallWatch(clock.now_ms, threshold_ms=1000, tick_ms=100)
    clock.set(0)
    assert watch.observe() == 0
    clock.set(900)  # measured from the latest time seen, 5000: still no gap
    assert watch.observe() == 0


def test_a_tick_not_below_the_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="tick 1000 ms must be above 0 and below the threshold"):
        StallWatch(threshold_ms=1000, tick_ms=1000)
