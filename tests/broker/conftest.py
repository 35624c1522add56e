"""Fixtures shared by the broker unit tests."""

import asyncio
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in its own thread (as the node's loop is, seen from the
    prometheus-client scrape thread)."""
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    yield loop
    if not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
        loop.close()
