"""What every step of a mirror metadata refresh shares: the per-mirror state (`_Mirror`), the
error and skip counters with their once-per-message logs, the timeout on source calls, and the
regex lists of the mirror's settings.
"""

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..metadata.image import MetadataImage
from .metadata_sync_interfaces import SyncSource

# The name the code logged under before metadata_sync.py was split: KMIRROR_LOG_LEVELS lines
# and the (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.metadata_sync")


def compile_patterns(value: str) -> list[re.Pattern[str]]:
    """A comma-separated list of regexes (``mirror.groups.include``, the exclude list)."""
    return [re.compile(p.strip()) for p in value.split(",") if p.strip()]


@dataclass(slots=True)
class _Mirror:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: "asyncio.Task[None] | None" = None
    client: SyncSource | None = None
    client_config: dict[str, str] = field(default_factory=dict)
    cluster_id: str | None = None
    halted: bool = False
    said: dict[str, str] = field(default_factory=dict)  # kind -> last message logged


class SyncState:
    """The base of `MirrorMetadataSync` and its sync steps (mixins: the state is
    `MirrorMetadataSync`'s, set up by it)."""

    _image: Callable[[], MetadataImage]
    _timeout_ms: int
    _state: dict[str, _Mirror]
    errors: dict[tuple[str, str], int]
    skipped: dict[tuple[str, str], int]

    # -- counters and logs ---------------------------------------------------------------------

    @staticmethod
    def _count(counter: dict[tuple[str, str], int], mirror: str, kind: str) -> None:
        counter[(mirror, kind)] = counter.get((mirror, kind), 0) + 1

    def _error(self, mirror: str, kind: str, message: str) -> None:
        self._count(self.errors, mirror, kind)
        st = self._state.get(mirror)
        if st is None or st.said.get(kind) != message:  # once per distinct message, not per cycle
            if st is not None:
                st.said[kind] = message
            log.warning("mirror %s: %s sync: %s", mirror, kind, message)

    def _skip(self, mirror: str, kind: str, why: str) -> None:
        self._count(self.skipped, mirror, kind)
        st = self._state.get(mirror)
        key = "skip:" + kind
        if st is None or key not in st.said:
            if st is not None:
                st.said[key] = why
            log.info("mirror %s: %s not synced: %s", mirror, kind.replace("_", " "), why)

    async def _call(self, work: Awaitable[Any]) -> Any:
        return await asyncio.wait_for(work, self._timeout_ms / 1000)
