"""Test only: a signal that stalls this node's event loop, as a long synchronous call would.

With ``KMIRROR_DEBUG_STALL_ON_SIGUSR1=<ms>`` in the node's environment, SIGUSR1 makes the loop's
thread sleep that long (a Python-level handler runs in that thread between two steps of the
loop), so tests can stall the request loop of one node without stopping its process (SIGSTOP
stops every thread). Unset, SIGUSR1 keeps its default action. Never set it in production.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Mapping
from types import FrameType

log = logging.getLogger(__name__)

ENV = "KMIRROR_DEBUG_STALL_ON_SIGUSR1"


def install_from_env(environ: Mapping[str, str] = os.environ) -> int | None:
    """Install the SIGUSR1 stall when ``ENV`` asks for it; the stall's length in ms, or None."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        ms = int(raw)
    except ValueError:
        ms = 0
    if ms <= 0:
        log.warning("%s=%r ignored: not a positive number of milliseconds", ENV, raw)
        return None

    def stall(signum: int, frame: FrameType | None) -> None:
        log.warning("debug: stalling the event loop for %d ms (SIGUSR1, %s)", ms, ENV)
        time.sleep(ms / 1000)
        log.warning("debug: the event loop runs again")

    signal.signal(signal.SIGUSR1, stall)
    log.warning("debug: SIGUSR1 stalls this node's event loop for %d ms (%s, tests only)", ms, ENV)
    return ms
