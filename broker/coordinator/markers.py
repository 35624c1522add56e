"""Append a COMMIT/ABORT transaction marker to a local partition: the one place the
coordinators do (the transaction coordinator for data partitions, the group coordinator for
`__consumer_offsets`). The marker itself is built and fenced by `PartitionLog.append_txn_marker`.
"""

from typing import Any

from .runtime import EndMarker


def append_end_marker(partition: Any, marker: EndMarker) -> int:
    """Append `marker` to `partition` (a ``Partition`` this node leads); its offset. Raises
    LogAppendError. The marker is committed once the ISR holds it (callers that must know
    wait with ``Partition.wait_committed``)."""
    result = partition.append_txn_marker(
        marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.commit
    )
    return int(result.first_offset)
