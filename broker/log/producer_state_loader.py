"""Attach a `ProducerStateManager` to a partition log, rebuilding its state from disk.

The newest usable snapshot (written per segment roll, per recovery checkpoint and on clean
shutdown) is loaded, then every batch after it is replayed (see
``PartitionLog.load_producer_state``). Without a snapshot the whole log is replayed, which is
what makes idempotent dedupe survive a kill -9.
"""

from typing import Any

from .clock import Clock
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager


def attach_producer_state(
    plog: Any, clock: Clock, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
) -> ProducerStateManager:
    """``expiration_ms``: producer.id.expiration.ms (producers idle that long are forgotten
    by the log manager's periodic check, and not loaded from a snapshot)."""
    psm = ProducerStateManager(plog.dir, clock, max_producer_id_expiration_ms=expiration_ms)
    plog.load_producer_state(psm)
    return psm


def snapshot_producer_state(plog: Any) -> None:
    """The clean-shutdown snapshot at the log end, also when no producer is known: as in Kafka,
    an empty snapshot tells the next start there is nothing to replay (without one it would
    read every batch of the log)."""
    psm = plog.producer_state
    if not isinstance(psm, ProducerStateManager):
        return
    end = plog.log_end_offset
    if end <= plog.log_start_offset:
        return  # an empty log: nothing to replay anyway
    latest = psm.latest_snapshot_offset()
    if latest is None or latest < end:
        psm.take_snapshot(end)
