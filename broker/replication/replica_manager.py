"""Hosts the partitions the metadata image assigns to this node and serves appends and reads.

Single-node semantics for now: this node leads every partition it hosts, the ISR is itself, and
the high watermark follows the log end offset. Fetches that find too little data wait on a
per-manager condition that every append notifies (Kafka's "delayed fetch").
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from protocol.build import error_code

from ..log.clock import Clock
from ..log.errors import LogAppendError
from ..log.producer_state_loader import attach_producer_state, snapshot_producer_state
from ..metadata.image import METADATA_TOPIC, Delta, MetadataImage, PartitionImage

log = logging.getLogger(__name__)


@dataclass(slots=True)
class HostedPartition:
    topic: str
    partition: int
    log: Any  # broker.log PartitionLog
    leader_epoch: int
    is_leader: bool


class MarkerAppend(NamedTuple):
    """What ``append_txn_marker`` did: NONE and the marker's offset, or an error and -1."""

    error: ErrorCode
    offset: int
    message: str | None = None


def leader_epoch_error(hosted: HostedPartition, current_leader_epoch: int) -> ErrorCode | None:
    """Kafka's check of a request's current leader epoch against ours (-1: not checked)."""
    if current_leader_epoch < 0 or current_leader_epoch == hosted.leader_epoch:
        return None
    if current_leader_epoch < hosted.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: Any,
        log_config_for: Callable[[str], Any],
        clock: Clock,
    ) -> None:
        self._clock = clock
        self._node_id = node_id
        self._logs = log_manager
        self._config_for = log_config_for
        self._partitions: dict[tuple[str, int], HostedPartition] = {}
        self._data_arrived = asyncio.Event()

    def get(self, topic: str, partition: int) -> HostedPartition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> Mapping[tuple[str, int], HostedPartition]:
        return self._partitions

    def apply_delta(self, image: MetadataImage, delta: Delta) -> None:
        for gone in delta.deleted_topics:
            for p in gone.partitions:
                hosted = self._partitions.pop((gone.name, p), None)
                if hosted is not None:
                    self._logs.delete(gone.name, p)
                    log.info("deleted partition %s-%d", gone.name, p)
        for name, p in delta.changed_partitions:
            topic = image.topics.get(name)
            if topic is None or name == METADATA_TOPIC:
                continue
            self._become(name, topic.topic_id, topic.partitions[p])
        for resource_type, name in delta.changed_configs:
            if resource_type == 2 and name in image.topics:
                config = self._config_for(name)
                for (t, _p), hosted in self._partitions.items():
                    if t == name:
                        hosted.log.update_config(config)

    def _become(self, topic: str, topic_id: Any, p: PartitionImage) -> None:
        if self._node_id not in p.replicas:
            hosted = self._partitions.pop((topic, p.partition), None)
            if hosted is not None:
                self._logs.delete(topic, p.partition)
            return
        hosted = self._partitions.get((topic, p.partition))
        if hosted is None:
            plog = self._logs.get_or_create(topic, p.partition, topic_id, self._config_for(topic))
            plog.high_watermark = plog.log_end_offset
            attach_producer_state(plog, self._clock)
            hosted = HostedPartition(
                topic, p.partition, plog, p.leader_epoch, p.leader == self._node_id
            )
            self._partitions[(topic, p.partition)] = hosted
        hosted.leader_epoch = p.leader_epoch
        hosted.is_leader = p.leader == self._node_id
        epochs = hosted.log.leader_epoch_cache
        latest = epochs.latest_epoch
        # Never move the history backwards: a mirrored log carries the source's (higher) epochs.
        if hosted.is_leader and (latest is None or p.leader_epoch > latest):
            epochs.assign(p.leader_epoch, hosted.log.log_end_offset)

    def append_txn_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
    ) -> MarkerAppend:
        """Write a transaction's COMMIT (``commit``) or ABORT marker to a partition this node
        leads, as the transaction coordinator's WriteTxnMarkers does.

        Errors: UNKNOWN_TOPIC_OR_PARTITION (not hosted here), NOT_LEADER_OR_FOLLOWER,
        INVALID_PRODUCER_EPOCH (older than the partition's producer state knows),
        TRANSACTION_COORDINATOR_FENCED (older coordinator epoch), KAFKA_STORAGE_ERROR.
        On success the high watermark (single node: the log end) and so the last stable
        offset move past the marker, and waiting fetches wake up.
        """
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            return MarkerAppend(ErrorCode.unknown_topic_or_partition, -1)
        if not hosted.is_leader:
            return MarkerAppend(ErrorCode.not_leader_or_follower, -1)
        plog = hosted.log
        try:
            result = plog.append_txn_marker(
                producer_id,
                producer_epoch,
                coordinator_epoch,
                commit,
                leader_epoch=hosted.leader_epoch,
                now_ms=self._clock.now_ms(),
            )
        except LogAppendError as e:
            return MarkerAppend(error_code(e.error_code), -1, e.message)
        except OSError as e:
            log.exception("marker append to %s-%d failed", topic, partition)
            return MarkerAppend(ErrorCode.kafka_storage_error, -1, str(e))
        plog.high_watermark = plog.log_end_offset
        self.notify_append()
        return MarkerAppend(ErrorCode.none, int(result.first_offset))

    def notify_append(self) -> None:
        self._data_arrived.set()
        self._data_arrived = asyncio.Event()

    async def wait_for_data(self, timeout_s: float) -> None:
        """Wait until any partition gets new data or the timeout passes."""
        event = self._data_arrived
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)

    def snapshot_all(self) -> None:
        """Write producer-state snapshots so the next start need not replay the logs."""
        for hosted in self._partitions.values():
            try:
                snapshot_producer_state(hosted.log)
            except OSError:
                log.exception("producer snapshot of %s-%d failed", hosted.topic, hosted.partition)
