"""The cyclic garbage collector set for a node's heap: large, long-lived, and mostly acyclic
garbage.

A node with thousands of partitions holds a few hundred thousand long-lived objects (logs,
replica and mirror state, the metadata image). With CPython's defaults every full collection
walks all of them, and a burst of work (a failover of 2,000 partitions: tasks, futures,
records) triggers several: 0.3-0.4 s of each node's CPU in a 3 s failover went to full
collections that found nothing to free. Two measures:

- A larger young generation (``YOUNG_THRESHOLD`` allocations instead of 700): a request's
  transient objects die by reference counting before a collection promotes them.
- Survivors are frozen (`gc.freeze`): once a full collection has walked a large heap,
  everything that survived it is moved out of the collector's sight, so the next one walks
  only what was allocated since. Cyclic garbage among frozen objects is not reclaimed until
  `compact` (a full collection of everything, then freeze again) every ``COMPACT_INTERVAL_S``:
  such cycles are rare here (full collections free tens of objects), so that bounds what ten
  minutes of closed connections or deleted partitions can hold.

Process-wide: installed by the node process (`broker.node_process`), not by a `Node` built in
a test's process. The collector's callback only raises a flag (it may run on the log writer
thread); the freeze itself happens on the loop, in `tick`.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any, Final

from .metrics.gc_metrics import GcStats

log = logging.getLogger(__name__)

YOUNG_THRESHOLD: Final = 10_000  # CPython's default is 700
SLOW_FULL_COLLECTION_S: Final = 0.01  # a full collection longer than this freezes survivors
COMPACT_INTERVAL_S: Final = 600.0


class GcPolicy:
    def __init__(
        self,
        young_threshold: int = YOUNG_THRESHOLD,
        slow_full_s: float = SLOW_FULL_COLLECTION_S,
        compact_interval_s: float = COMPACT_INTERVAL_S,
    ) -> None:
        self._young = young_threshold
        self._slow_full_s = slow_full_s
        self._compact_interval_s = compact_interval_s
        self._saved: tuple[int, int, int] | None = None
        self._started = 0.0
        self._freeze_due = False
        self._last_compact = time.monotonic()
        self.pauses = [0, 0, 0]  # collections per generation
        self.pause_s = [0.0, 0.0, 0.0]  # time spent in them
        self.freezes = 0

    def install(self) -> None:
        global _installed
        _installed = self
        self._saved = gc.get_threshold()
        _, gen1, gen2 = self._saved
        gc.set_threshold(self._young, gen1, gen2)
        gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        global _installed
        if _installed is self:
            _installed = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        gc.unfreeze()

    def stats(self) -> GcStats:
        """For the metrics (any thread: counters copied, never updated in place)."""
        c, p = self.pauses, self.pause_s
        return GcStats((c[0], c[1], c[2]), (p[0], p[1], p[2]), self.freezes, gc.get_freeze_count())

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        took = time.perf_counter() - self._started
        self.pauses[generation] += 1
        self.pause_s[generation] += took
        if generation == 2 and took > self._slow_full_s:
            self._freeze_due = True

    def tick(self) -> None:
        """From the loop, about once a second: freeze after a slow full collection, compact
        once per interval."""
        if time.monotonic() - self._last_compact >= self._compact_interval_s:
            self.compact()
        elif self._freeze_due:
            self._freeze_due = False
            gc.freeze()
            self.freezes += 1

    def compact(self) -> None:
        """Reclaim cycles among frozen objects: one full collection of the whole heap (it holds
        the loop for as long as that takes), then freeze the survivors again."""
        self._last_compact = time.monotonic()
        started = time.perf_counter()
        gc.unfreeze()
        freed = gc.collect()
        gc.freeze()
        self._freeze_due = False
        self.freezes += 1
        log.debug(
            "heap compacted: %d objects freed, %d frozen, %.0f ms",
            freed,
            gc.get_freeze_count(),
            (time.perf_counter() - started) * 1000,
        )


_installed: GcPolicy | None = None


def installed_stats() -> GcStats | None:
    """The installed policy's figures, for the metrics endpoint; None when none is."""
    policy = _installed
    return None if policy is None else policy.stats()
