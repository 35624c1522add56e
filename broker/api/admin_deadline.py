"""Controller writes answer within the request's own timeout, whatever they wait on.

Kafka's controller gives CreateTopics, DeleteTopics, CreatePartitions (and the other writes it
serves) a deadline: the request's ``timeout_ms`` when it has one, Kafka's default request
timeout otherwise. A write still waiting then (no quorum to commit it, say) is answered
REQUEST_TIMED_OUT for everything asked, never left without an answer. The handler is
cancelled: the controller's written state keeps what it appended (``ControllerBase._commit``).
A timeout of zero or less keeps the default bound, so such a request still does its work.
"""

import asyncio
import datetime
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

from .forwarding import CONTROLLER_WRITES

DEFAULT_TIMEOUT_MS: Final = 30_000  # Kafka's request.timeout.ms

T = TypeVar("T")


def timeout_ms(api_key: int, request: Any) -> int | None:
    """How long a controller write may take, None for any other request."""
    if api_key not in CONTROLLER_WRITES:
        return None
    value = getattr(request, "timeout", None)
    if isinstance(value, datetime.timedelta):
        ms = int(value.total_seconds() * 1000)
    else:
        ms = int(getattr(request, "timeout_ms", 0) or 0)
    return ms if ms > 0 else DEFAULT_TIMEOUT_MS


async def within(limit_ms: int | None, call: Awaitable[T]) -> tuple[bool, T | None]:
    """(True, result) when ``call`` completes within ``limit_ms``, (False, None) when it did
    not (it is cancelled)."""
    if limit_ms is None:
        return True, await call
    try:
        return True, await asyncio.wait_for(call, limit_ms / 1000)
    except TimeoutError:
        return False, None
