"""What every step of a mirror metadata refresh shares: the per-mirror state (`SyncMirror`),
the error and skip counters with their once-per-message logs and the timeout on source calls
(`SyncReport`, given to each step), and the regex lists of the mirror's settings.
"""

import asyncio
import logging
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .metadata_sync_interfaces import SyncSource

# The name the code logged under before metadata_sync.py was split: KMIRROR_LOG_LEVELS lines
# and the (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.metadata_sync")


def compile_patterns(value: str) -> list[re.Pattern[str]]:
    """A comma-separated list of regexes (``mirror.groups.include``, the exclude list)."""
    return [re.compile(p.strip()) for p in value.split(",") if p.strip()]


@dataclass(slots=True)
class SyncMirror:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: "asyncio.Task[None] | None" = None
    client: SyncSource | None = None
    client_config: dict[str, str] = field(default_factory=dict)
    cluster_id: str | None = None
    halted: bool = False
    said: dict[str, str] = field(default_factory=dict)  # kind -> last message logged


def count(counter: dict[tuple[str, str], int], mirror: str, kind: str) -> None:
    counter[(mirror, kind)] = counter.get((mirror, kind), 0) + 1


class SyncReport:
    """Errors and skips of the refresh steps (counted for the metrics exporter, logged once per
    distinct message), and source calls under the refresh's timeout."""

    def __init__(self, state: Mapping[str, SyncMirror], timeout_ms: int) -> None:
        self._state = state  # the sync's mirrors: what each last said
        self._timeout_ms = timeout_ms
        self.errors: dict[tuple[str, str], int] = {}
        self.skipped: dict[tuple[str, str], int] = {}

    def error(self, mirror: str, kind: str, message: str) -> None:
        count(self.errors, mirror, kind)
        st = self._state.get(mirror)
        if st is None or st.said.get(kind) != message:  # once per distinct message, not per cycle
            if st is not None:
                st.said[kind] = message
            log.warning("mirror %s: %s sync: %s", mirror, kind, message)

    def skip(self, mirror: str, kind: str, why: str) -> None:
        count(self.skipped, mirror, kind)
        st = self._state.get(mirror)
        key = "skip:" + kind
        if st is None or key not in st.said:
            if st is not None:
                st.said[key] = why
            log.info("mirror %s: %s not synced: %s", mirror, kind.replace("_", " "), why)

    async def call(self, work: Awaitable[Any]) -> Any:
        return await asyncio.wait_for(work, self._timeout_ms / 1000)
