"""Hosts the partitions the metadata image assigns to this node (Kafka's ReplicaManager).

For every partition whose replica set holds this node there is one ``Partition``, the sole
owner of its log's appends and high watermark. Metadata makes each one leader or follower
(``apply_delta``); a follower is handed to the replica fetchers, a leader serves its followers'
Fetch requests and sends its ISR changes to the controller (``AlterPartitionSender``) one at a
time. A periodic check shrinks ISRs whose members fell behind for ``replica.lag.time.max.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from protocol.build import error_code

from ..log.clock import Clock
from ..log.errors import LogAppendError
from ..log.file_cache import is_fd_exhaustion, note_fd_exhaustion
from ..log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from ..log.producer_state_loader import attach_producer_state, snapshot_producer_state
from ..metadata.image import METADATA_TOPIC, Delta, MetadataImage, PartitionImage
from .isr import AlterPartitionRequest
from .partition import Partition
from .partition_state import PartitionRegistration, ReplicationConfig

log = logging.getLogger(__name__)

# Kept for the modules that name a hosted partition by its old name.
HostedPartition = Partition

_ALTER_RETRY_S = 0.1
_ALTER_MAX_RETRIES = 50
# New logs opened within one metadata apply once serving; a bigger batch (a CreateTopics of
# thousands of partitions) is opened in slices of the loop's time between other work, so the
# metadata quorum, replication and clients are not stalled for seconds (a 2,000-partition
# topic on three nodes stalled each node 7 s and cost two quorum elections).
CREATE_INLINE = 64
CREATE_SLICE_S = 0.05


class MarkerAppend(NamedTuple):
    """What ``append_txn_marker`` did: NONE and the marker's offset, or an error and -1."""

    error: ErrorCode
    offset: int
    message: str | None = None


class AlterSender(Protocol):
    async def send(
        self, topic_id: Any, partition: int, request: AlterPartitionRequest
    ) -> tuple[ErrorCode, PartitionRegistration | None]: ...


class FollowerFetchers(Protocol):
    def assign(self, partition: Partition) -> None: ...
    def unassign(self, partition: Partition) -> None: ...


def leader_epoch_error(
    hosted: Partition, current_leader_epoch: int, *, require_leader: bool = True
) -> ErrorCode | None:
    """Kafka's checks for a client request on a partition: the request's current leader epoch
    against ours (-1: not checked), then leadership unless a follower may answer (a v11+
    consumer Fetch, KIP-392)."""
    if current_leader_epoch >= 0 and current_leader_epoch != hosted.leader_epoch:
        if current_leader_epoch < hosted.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch
    if require_leader and not hosted.is_leader:
        return ErrorCode.not_leader_or_follower
    return None


class ImageBrokers:
    """``BrokerView`` over the newest metadata image."""

    def __init__(self) -> None:
        self.image = MetadataImage()

    def broker_epoch(self, broker_id: int) -> int | None:
        b = self.image.brokers.get(broker_id)
        return None if b is None or b.fenced else b.epoch

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        b = self.image.brokers.get(broker_id)
        return b is not None and b.in_controlled_shutdown


class ReplicationStats(NamedTuple):
    """For the metrics: partitions this node leads, those whose ISR is short of the replica
    set or of min.insync.replicas, and the ISR changes the controller accepted."""

    leaders: int
    under_replicated: int
    under_min_isr: int
    isr_shrinks: int
    isr_expands: int


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: Any,
        log_config_for: Callable[[str], Any],
        clock: Clock,
        replication_config_for: Callable[[str], ReplicationConfig] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        *,
        fetchers: FollowerFetchers | None = None,
        alter_sender: AlterSender | None = None,
        on_hosted: Callable[[list[tuple[str, int]]], None] | None = None,
    ) -> None:
        self._clock = clock
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._node_id = node_id
        self._logs = log_manager
        self._config_for = log_config_for
        self._replication_config_for = replication_config_for or (lambda _t: ReplicationConfig())
        self._partitions: dict[tuple[str, int], Partition] = {}
        self.brokers = ImageBrokers()
        self.alter_sender: AlterSender | None = alter_sender
        self.fetchers: FollowerFetchers | None = fetchers
        self._tasks: set[asyncio.Task[None]] = set()
        self.isr_shrinks = 0
        self.isr_expands = 0
        # partitions of the image whose log could not be opened (out of descriptors): retried
        self._unopened: set[tuple[str, int]] = set()
        # Set once the node serves: new partitions beyond CREATE_INLINE per apply are opened in
        # the background (`_to_create`, in order), and `on_hosted` hears of each slice.
        self.defer_creation = False
        self.on_hosted = on_hosted
        self._to_create: dict[tuple[str, int], None] = {}
        self._creator: asyncio.Task[None] | None = None

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> Mapping[tuple[str, int], Partition]:
        return self._partitions

    def local_broker_epoch(self) -> int:
        b = self.brokers.image.brokers.get(self._node_id)
        return -1 if b is None else b.epoch

    # --- metadata -----------------------------------------------------------------------------

    def apply_delta(self, image: MetadataImage, delta: Delta) -> None:
        self.brokers.image = image
        for gone in delta.deleted_topics:
            for p in gone.partitions:
                self._to_create.pop((gone.name, p), None)
                hosted = self._partitions.pop((gone.name, p), None)
                if hosted is not None:
                    self._drop(hosted)
                    log.info("deleted partition %s-%d", gone.name, p)
        opened = 0
        for name, p in delta.changed_partitions:
            topic = image.topics.get(name)
            if topic is None or name == METADATA_TOPIC or p not in topic.partitions:
                continue
            key = (name, p)
            if key in self._to_create:
                continue  # opened with the image of its turn
            if (
                self.defer_creation
                and key not in self._partitions
                and self._node_id in topic.partitions[p].replicas
            ):
                if opened >= CREATE_INLINE:
                    self._to_create[key] = None
                    continue
                opened += 1
            self._try_become(name, p)
        if self._to_create and (self._creator is None or self._creator.done()):
            self._creator = asyncio.get_running_loop().create_task(self._create_deferred())
        for resource_type, name in delta.changed_configs:
            if resource_type == 2 and name in image.topics:
                config = self._config_for(name)
                replication = self._replication_config_for(name)
                for (t, _p), hosted in self._partitions.items():
                    if t == name:
                        hosted.log.update_config(config)
                        hosted.update_config(replication)
            elif resource_type == 4:  # a broker default (min.insync.replicas) may have changed
                for hosted in self._partitions.values():
                    hosted.update_config(self._replication_config_for(hosted.topic))

    async def _create_deferred(self) -> None:
        """Open the queued partitions' logs, a time slice at a time, in the order they came."""
        log.info("opening %d new partition logs in the background", len(self._to_create))
        start = time.monotonic()
        count = 0
        while self._to_create:
            await asyncio.sleep(0)
            done: list[tuple[str, int]] = []
            deadline = time.monotonic() + CREATE_SLICE_S
            while self._to_create and time.monotonic() < deadline:
                key = next(iter(self._to_create))
                del self._to_create[key]
                try:
                    self._try_become(*key)
                except Exception:  # this partition stays unhosted; the others go on
                    log.exception("opening the log of %s-%d failed", *key)
                if key in self._partitions:
                    done.append(key)
            count += len(done)
            if done and self.on_hosted is not None:
                self.on_hosted(done)
        log.info("opened %d partition logs in %.1f s", count, time.monotonic() - start)

    def _try_become(self, name: str, p: int) -> None:
        topic = self.brokers.image.topics.get(name)
        if topic is None or p not in topic.partitions:
            self._unopened.discard((name, p))
            return
        try:
            self._become(name, topic.topic_id, topic.partitions[p])
        except OSError as e:
            if not is_fd_exhaustion(e):
                raise
            # Out of descriptors: this partition stays unhosted (clients get
            # NOT_LEADER_OR_FOLLOWER and retry) until a periodic retry opens it; every other
            # one goes on.
            self._unopened.add((name, p))
            note_fd_exhaustion("opening the log", f"{name}-{p}", e)
        else:
            self._unopened.discard((name, p))

    def _drop(self, hosted: Partition) -> None:
        hosted.stop()
        if self.fetchers is not None:
            self.fetchers.unassign(hosted)
        self._logs.delete(hosted.topic, hosted.partition)

    def _become(self, topic: str, topic_id: Any, p: PartitionImage) -> None:
        if self._node_id not in p.replicas:
            hosted = self._partitions.pop((topic, p.partition), None)
            if hosted is not None:
                self._drop(hosted)
            return
        hosted = self._partitions.get((topic, p.partition))
        if hosted is None:
            plog = self._logs.get_or_create(topic, p.partition, topic_id, self._config_for(topic))
            attach_producer_state(plog, self._clock, self._producer_id_expiration_ms)
            hosted = Partition(
                topic,
                p.partition,
                topic_id,
                plog,
                self._node_id,
                self.brokers,
                self._replication_config_for(topic),
                self._clock.now_ms,
                self._on_alter,
            )
            self._partitions[(topic, p.partition)] = hosted
        was_leader = hosted.is_leader
        restart = hosted.become(p, self.local_broker_epoch())
        if self.fetchers is None:
            return
        if hosted.is_leader or p.leader < 0:
            if not was_leader or p.leader < 0:
                self.fetchers.unassign(hosted)
        elif restart or was_leader:
            self.fetchers.assign(hosted)

    # --- ISR changes --------------------------------------------------------------------------

    def _on_alter(self, partition: Partition, request: AlterPartitionRequest) -> None:
        # the committed ISR as the leader proposes the change (metadata may apply the change
        # before the answer arrives, so the count is taken against this)
        before = len(partition.leader.isr)
        task = asyncio.get_event_loop().create_task(self._send_alter(partition, request, before))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_alter(
        self, partition: Partition, request: AlterPartitionRequest, before: int
    ) -> None:
        sender = self.alter_sender
        if sender is None:
            log.warning("no controller to send the ISR change of %s to", partition)
            return
        for _ in range(_ALTER_MAX_RETRIES):
            try:
                error, reg = await sender.send(partition.topic_id, partition.partition, request)
            except Exception as e:  # the controller unreachable: the leader retries
                log.info("AlterPartition for %s failed: %s", partition, e)
                error, reg = ErrorCode.request_timed_out, None
            outcome = partition.on_alter_partition_response(request.request_id, error, reg)
            if error == ErrorCode.none and reg is not None:
                if len(reg.isr) > before:
                    self.isr_expands += 1
                elif len(reg.isr) < before:
                    self.isr_shrinks += 1
                log.info("%s: ISR now %s", partition, sorted(reg.isr))
            if outcome.retry is None:
                if error != ErrorCode.none:
                    log.info("AlterPartition for %s: %s", partition, error.name)
                return
            await asyncio.sleep(_ALTER_RETRY_S)
        log.warning("AlterPartition for %s gave up after %d tries", partition, _ALTER_MAX_RETRIES)

    def stats(self) -> ReplicationStats:
        leaders = under = under_min = 0
        for hosted in self._partitions.values():
            if not hosted.is_leader:
                continue
            leaders += 1
            state = hosted.leader
            if len(state.isr) < len(state.replicas):
                under += 1
            if state.under_min_isr:
                under_min += 1
        return ReplicationStats(leaders, under, under_min, self.isr_shrinks, self.isr_expands)

    def check_isrs(self) -> None:
        """The periodic shrink: leaders drop followers not caught up within the lag time; and
        another try at partitions whose log could not be opened for want of descriptors."""
        for name, p in list(self._unopened):
            self._try_become(name, p)
        for hosted in list(self._partitions.values()):
            if hosted.is_leader:
                hosted.maybe_shrink_isr()

    async def run_isr_checks(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.check_isrs()

    # --- appends for the coordinators ---------------------------------------------------------

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
        The marker is committed once the ISR holds it (acks=all is the caller's wait).
        """
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            return MarkerAppend(ErrorCode.unknown_topic_or_partition, -1)
        if not hosted.is_leader:
            return MarkerAppend(ErrorCode.not_leader_or_follower, -1)
        try:
            result = hosted.append_txn_marker(
                producer_id, producer_epoch, coordinator_epoch, commit
            )
        except LogAppendError as e:
            return MarkerAppend(error_code(e.error_code), -1, e.message)
        except OSError as e:
            log.exception("marker append to %s-%d failed", topic, partition)
            return MarkerAppend(ErrorCode.kafka_storage_error, -1, str(e))
        return MarkerAppend(ErrorCode.none, int(result.first_offset))

    def snapshot_all(self) -> None:
        """Write producer-state snapshots so the next start need not replay the logs."""
        for hosted in self._partitions.values():
            try:
                snapshot_producer_state(hosted.log)
            except OSError:
                log.exception("producer snapshot of %s-%d failed", hosted.topic, hosted.partition)

    async def close(self) -> None:
        self._to_create.clear()
        if self._creator is not None:
            self._creator.cancel()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):  # cancelled or failed: closing anyway
                await task
