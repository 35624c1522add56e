"""Where a transaction's COMMIT/ABORT markers go: this node's partitions.

`__consumer_offsets` partitions get theirs through the group coordinator, which writes the
marker and makes the producer's pending offsets visible (or drops them) in one step, as Kafka's
group coordinator does; every other partition gets it through `append_end_marker`. The group
coordinator's "not ready" answers become NOT_LEADER_OR_FOLLOWER (retry), as in Kafka.
A read-only mirror partition (KIP-1279) gets no marker (READ_ONLY_TOPIC): its log must stay the
source's byte for byte, and no transactional batch can be in it (Produce refuses them too).
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from protocol.build import error_code
from protocol.errors import MirrorErrorCode

from ..markers import append_end_marker
from ..runtime import EndMarker

log = logging.getLogger(__name__)

_NOT_READY = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
    }
)


MarkerResult = ErrorCode | MirrorErrorCode


class MarkerWriter(Protocol):
    async def write_marker(self, topic: str, partition: int, marker: EndMarker) -> MarkerResult:
        """Append the marker to the partition; the partition's error (NONE when written)."""
        ...


class LocalMarkerWriter:
    def __init__(
        self,
        replicas: Any,
        now_ms: Callable[[], int],
        offsets_topic: str,
        complete_offsets: Callable[[int, EndMarker], Awaitable[ErrorCode]] | None = None,
        writable: Callable[[str, int], bool] | None = None,
        commit_timeout_s: float = 30.0,
    ) -> None:
        self._replicas = replicas
        self._commit_timeout_s = commit_timeout_s
        self._now_ms = now_ms
        self._offsets_topic = offsets_topic
        self._complete_offsets = complete_offsets
        self._writable = writable

    async def write_marker(self, topic: str, partition: int, marker: EndMarker) -> MarkerResult:
        hosted = self._replicas.get(topic, partition)
        if hosted is None:
            return ErrorCode.unknown_topic_or_partition
        if not hosted.is_leader:
            return ErrorCode.not_leader_or_follower
        if self._writable is not None and not self._writable(topic, partition):
            return MirrorErrorCode.READ_ONLY_TOPIC
        if topic == self._offsets_topic and self._complete_offsets is not None:
            code = await self._complete_offsets(partition, marker)
            return ErrorCode.not_leader_or_follower if code in _NOT_READY else code
        try:
            offset = append_end_marker(hosted, marker)
        except Exception as e:
            log_code = getattr(e, "error_code", None)
            if log_code is None:
                log.exception("marker append to %s-%d failed", topic, partition)
                return ErrorCode.unknown_server_error
            return error_code(int(log_code))  # type: ignore[no-any-return]
        # Done once the ISR holds it (already so when the HW passed it, even if the ISR has
        # since shrunk under min.insync.replicas); the coordinator retries on an error.
        code = await hosted.wait_committed(offset + 1, self._commit_timeout_s)
        return ErrorCode.none if code == ErrorCode.not_enough_replicas_after_append else code
