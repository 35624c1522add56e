"""Attach a `ProducerStateManager` to a partition log, rebuilding its state from disk.

The newest usable snapshot (written per segment roll and on clean shutdown) is loaded, then
every batch after it is replayed (see ``PartitionLog.load_producer_state``). Without a snapshot
the whole log is replayed, which is what makes idempotent dedupe survive a kill -9.
"""

from typing import Any

from .clock import Clock
from .producer_state import ProducerStateManager


def attach_producer_state(plog: Any, clock: Clock) -> ProducerStateManager:
    psm = ProducerStateManager(plog.dir, clock)
    plog.load_producer_state(psm)
    return psm


def snapshot_producer_state(plog: Any) -> None:
    psm = plog.producer_state
    if isinstance(psm, ProducerStateManager) and psm.producer_count:
        psm.take_snapshot(plog.log_end_offset)
