"""Waiting for a condition in a test: poll it until it holds, fail saying what never happened.

A sleep before an assertion passes or fails with the machine's speed; these wait as long as the
condition needs and no longer than ``timeout``. One implementation for the whole test tree:
the integration tests use it as ``clients.wait_for`` (tests/integration/clients.py), the
in-process asyncio tests as ``wait_for_async``.

The condition is checked once more after the deadline, so a slow last step is not a failure,
and it may itself raise (e.g. an ``assert`` that the node is still running) to stop the wait.
"""

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _timed_out(timeout: float, what: str, detail: Callable[[], object] | None) -> AssertionError:
    message = f"timed out after {timeout}s waiting for {what}"
    if detail is not None:
        message += f"\n{detail()}"
    return AssertionError(message)


def wait_for(
    cond: Callable[[], bool],
    timeout: float,
    what: str,
    step: float = 0.05,
    detail: Callable[[], object] | None = None,
) -> None:
    """Block until ``cond()`` is true; ``detail()`` (a log tail, say) is added to the failure."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, detail)
        time.sleep(step)


async def wait_for_async(
    cond: Callable[[], bool],
    timeout: float,
    what: str,
    step: float = 0.01,
    detail: Callable[[], object] | None = None,
) -> None:
    """``wait_for`` for a test running on an event loop: the loop keeps running meanwhile."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, detail)
        await asyncio.sleep(step)


def wait_value(
    get: Callable[[], T | None],
    timeout: float,
    what: str,
    step: float = 0.05,
    detail: Callable[[], object] | None = None,
) -> T:
    """Block until ``get()`` returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, detail)
        time.sleep(step)
