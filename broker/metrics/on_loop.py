"""Reading broker state for a scrape from the node's event loop.

prometheus-client serves scrapes from its own thread; broker state (dicts of partitions, mirror
fetchers, connections) is only consistent on the event loop, so collectors hand a builder to the
loop and wait for its result instead of reading the state themselves.
"""

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def read_on_loop(
    loop: asyncio.AbstractEventLoop,
    build: Callable[[], T],
    what: str = "metrics",
    timeout_s: float = 2.0,
) -> Callable[[], T | None]:
    """A reader for the scrape thread that runs ``build`` on ``loop`` and waits for its result,
    so it never sees the loop's dicts mid-update. None (and a log line) when the loop is closed,
    does not answer within ``timeout_s`` or ``build`` raises: the other metrics are still served."""

    def read() -> T | None:
        try:
            if asyncio.get_running_loop() is loop:
                return build()
        except RuntimeError:
            pass  # no loop in this thread: the usual case (prometheus-client's server thread)
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not done.set_running_or_notify_cancel():
                return
            try:
                done.set_result(build())
            except Exception as e:
                done.set_exception(e)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:
            return None  # the node is shutting down
        try:
            return done.result(timeout_s)
        except concurrent.futures.TimeoutError:
            done.cancel()
            log.warning("%s left out: the event loop did not answer in %ss", what, timeout_s)
        except Exception:
            log.exception("%s left out: reading them failed", what)
        return None

    return read
