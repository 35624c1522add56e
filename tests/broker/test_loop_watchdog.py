"""The loop watchdog names where a stalled event loop is stuck, and counts the stall once the
loop runs again."""

import asyncio
import logging
import time

import pytest

from broker.loop_watchdog import LoopWatchdog


def _hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # a blocking call on the loop, as a slow disk or a long loop would be


def test_a_stall_is_logged_with_the_loop_stack(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> LoopWatchdog:
        dog = LoopWatchdog(warn_after_s=0.3)
        dog.start()
        try:
            _hold_the_loop(0.8)
            for _ in range(200):  # the loop ticks again: the watchdog sees the stall end
                if dog.longest_s:
                    break
                await asyncio.sleep(0.01)
        finally:
            dog.stop()
        return dog

    with caplog.at_level(logging.WARNING, logger="broker.loop_watchdog"):
        dog = asyncio.run(main())
    text = caplog.text
    assert "event loop stalled" in text and "_hold_the_loop" in text
    assert "ran again after" in text
    assert dog.stalls == 1 and 0.4 < dog.longest_s < 1.5


def test_a_busy_but_responsive_loop_is_not_a_stall(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> LoopWatchdog:
        dog = LoopWatchdog(warn_after_s=0.5)
        dog.start()
        try:
            for _ in range(10):
                _hold_the_loop(0.05)
                await asyncio.sleep(0)
        finally:
            dog.stop()
        return dog

    with caplog.at_level(logging.WARNING, logger="broker.loop_watchdog"):
        dog = asyncio.run(main())
    assert dog.stalls == 0 and "stalled" not in caplog.text
