"""A stop that hangs says where: the pending tasks and their stacks are logged."""

import asyncio
import logging

import pytest

from broker.stop_watchdog import StopWatchdog


def test_a_hanging_stop_logs_the_pending_tasks(caplog: pytest.LogCaptureFixture) -> None:
    async def stuck_somewhere() -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        task = asyncio.create_task(stuck_somewhere())
        watchdog = StopWatchdog(0.05)
        watchdog.arm()
        await asyncio.sleep(0.3)
        watchdog.disarm()
        task.cancel()

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    assert "still stopping after" in caplog.text
    assert "stuck_somewhere" in caplog.text


def test_a_quick_stop_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        watchdog = StopWatchdog(0.2)
        watchdog.arm()
        await asyncio.sleep(0.01)
        watchdog.disarm()
        await asyncio.sleep(0.3)

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    assert "still stopping" not in caplog.text
