"""Append a COMMIT/ABORT transaction marker to a local partition log: the one place that does.

The marker is the control batch `protocol.records` builds, appended through the leader append
path with the coordinator origin, as the mirror manager appends MIRROR_PID_RESET. The log layer
is growing its own marker append (`ReplicaManager.append_txn_marker`); when it lands, this
function is what to swap for it.
"""

from typing import Any

from protocol.records import build_end_txn_marker

from ..log.validation import AppendOrigin
from .runtime import EndMarker


def append_end_marker(plog: Any, leader_epoch: int, marker: EndMarker, now_ms: int) -> int:
    """Append `marker` to `plog` (a leader's PartitionLog); its offset. Raises LogAppendError."""
    batch = build_end_txn_marker(
        marker.commit,
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch,
        partition_leader_epoch=leader_epoch,
        timestamp=now_ms,
    )
    result = plog.append_as_leader(
        batch, leader_epoch, now_ms=now_ms, origin=AppendOrigin.COORDINATOR
    )
    # Single node: committed once appended (the high watermark follows the log end).
    plog.high_watermark = plog.log_end_offset
    return int(result.first_offset)
