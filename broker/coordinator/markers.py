"""Append a COMMIT/ABORT transaction marker to a local partition log: the one place the
coordinators do (the transaction coordinator for data partitions, the group coordinator for
`__consumer_offsets`). The marker itself is built and fenced by `PartitionLog.append_txn_marker`.
"""

from typing import Any

from .runtime import EndMarker


def append_end_marker(plog: Any, leader_epoch: int, marker: EndMarker, now_ms: int) -> int:
    """Append `marker` to `plog` (a leader's PartitionLog); its offset. Raises LogAppendError."""
    result = plog.append_txn_marker(
        marker.producer_id,
        marker.producer_epoch,
        marker.coordinator_epoch,
        marker.commit,
        leader_epoch=leader_epoch,
        now_ms=now_ms,
    )
    # Single node: committed once appended (the high watermark follows the log end).
    plog.high_watermark = plog.log_end_offset
    return int(result.first_offset)
