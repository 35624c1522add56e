"""The mirror coordinator service: routes each mirror partition to its `__mirror_state` shard.

Writes that arrive together for one shard go in one append (a group commit): a shard runs one
write at a time and each waits for its commit, so a failover of many partitions would otherwise
wait for one replication round trip per partition and state change.

Errors are raised as `CoordinatorError`: NOT_COORDINATOR when the shard is not loaded here,
COORDINATOR_LOAD_IN_PROGRESS while it loads, INVALID_MIRROR_STATES (145) for a forbidden
transition, and the mapped append error when a write is not committed.
"""

import asyncio
import base64
import functools
import logging
import time
import uuid
from dataclasses import dataclass

from broker.coordinator.mirror.records import MirrorKey
from broker.coordinator.mirror.shard import MirrorShard
from broker.coordinator.runtime import (
    CoordinatorError,
    CoordinatorRuntime,
    Record,
    RecordLog,
    ShardContext,
    WriteResult,
    partition_for,
)
from broker.coordinator.timer import LoopScheduler, Scheduler
from broker.metadata.mirror_states import MirrorState

log = logging.getLogger(__name__)

MirrorStateEntry = tuple[tuple[str, uuid.UUID, int], MirrorState, int | None]


def kafka_uuid_str(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString()`: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def coordinator_key(mirror: str, topic_id: uuid.UUID, partition: int) -> str:
    """The prototype's composite coordinator key, ``<mirror>:<topic id>:<partition>``."""
    return f"{mirror}:{kafka_uuid_str(topic_id)}:{partition}"


@dataclass(slots=True)
class _PendingWrite:
    key: MirrorKey
    state: MirrorState | None
    epoch: int | None
    label: str
    done: "asyncio.Future[None]"


class MirrorCoordinator:
    def __init__(self, num_partitions: int, scheduler: Scheduler | None = None) -> None:
        # writes waiting for their shard's next group commit, and the task committing them
        self._pending: dict[int, list[_PendingWrite]] = {}
        self._flushers: dict[int, asyncio.Task[None]] = {}
        self._inflight: dict[int, set[MirrorKey]] = {}  # keys in the log, not yet committed
        # Shards by partition, so `states()` can answer without awaiting; the runtime decides
        # which of them are loaded.
        self._shards: dict[int, MirrorShard] = {}

        def factory(ctx: ShardContext[MirrorShard]) -> MirrorShard:
            shard = MirrorShard(ctx)
            self._shards[ctx.partition] = shard
            return shard

        self.runtime: CoordinatorRuntime[MirrorShard] = CoordinatorRuntime(
            num_partitions, factory, scheduler or LoopScheduler()
        )

    @property
    def num_partitions(self) -> int:
        return self.runtime.num_partitions

    # -- shard ownership (driven by __mirror_state leadership) -------------------------------

    def partition_for(self, mirror: str, topic_id: uuid.UUID, partition: int) -> int:
        """The prototype's routing (inkless-linking, ClusterMirrorCoordinatorService.partitionFor):
        ``Utils.abs(String.format("%s:%s:%d", mirror, topicId, partition).hashCode()) % n``,
        with Kafka's base64 topic id string, so both sides agree on the shard."""
        return partition_for(coordinator_key(mirror, topic_id, partition), self.num_partitions)

    def loaded_partitions(self) -> list[int]:
        return self.runtime.loaded_partitions()

    def is_loading(self, partition: int) -> bool:
        return self.runtime.is_loading(partition)

    async def load(self, partition: int, log: RecordLog) -> None:
        await self.runtime.load(partition, log)

    async def unload(self, partition: int) -> None:
        # The shard object stays in `_shards` emptied (on_unloaded); a later load replaces it.
        await self.runtime.unload(partition)

    async def close(self) -> None:
        await self.runtime.close()
        self._shards.clear()

    # -- operations -------------------------------------------------------------------------

    async def read_state(
        self, mirror: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[MirrorState, int | None]:
        """The partition's state (UNKNOWN when none is stored) and its last mirrored epoch."""
        k = MirrorKey(mirror, topic_id, partition)
        return await self.runtime.read(self.partition_for(*_fields(k)), lambda s: s.read(k))

    async def write_state(
        self,
        mirror: str,
        topic_id: uuid.UUID,
        partition: int,
        new: MirrorState,
        topic_name: str | None = None,
    ) -> None:
        """Persist a transition; the same state again succeeds without writing. `topic_name`
        only makes the INVALID_MIRROR_STATES message readable."""
        await self.write_partition(mirror, topic_id, partition, new, None, topic_name)

    async def write_last_mirror_epoch(
        self, mirror: str, topic_id: uuid.UUID, partition: int, epoch: int
    ) -> None:
        await self.write_partition(mirror, topic_id, partition, None, epoch)

    async def write_partition(
        self,
        mirror: str,
        topic_id: uuid.UUID,
        partition: int,
        state: MirrorState | None,
        last_mirror_epoch: int | None,
        topic_name: str | None = None,
    ) -> None:
        """A transition and/or an LME (None leaves it alone) in one atomic append."""
        k = MirrorKey(mirror, topic_id, partition)
        label = f"{topic_name or kafka_uuid_str(topic_id)}-{partition}"
        shard = self.partition_for(*_fields(k))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(shard, []).append(
            _PendingWrite(k, state, last_mirror_epoch, label, done)
        )
        self._start_flush(shard)
        await done

    def _start_flush(self, shard: int) -> None:
        flusher = self._flushers.get(shard)
        if flusher is None or flusher.done():
            self._flushers[shard] = asyncio.get_running_loop().create_task(self._flush(shard))

    async def _flush(self, shard: int) -> None:
        """Put the shard's pending writes in its log, a batch at a time, without waiting for
        the commit of one batch before the next goes in (their commits come together). A key
        with a write not yet committed waits for that commit, so each write of a key is checked
        against the state the one before it committed."""
        inflight = self._inflight.setdefault(shard, set())
        while self._pending.get(shard):
            await asyncio.sleep(0)  # the writes of this moment join the batch
            queue = self._pending.get(shard, [])
            batch: list[_PendingWrite] = []
            later: list[_PendingWrite] = []
            seen: set[MirrorKey] = set(inflight)
            for w in queue:
                (later if w.key in seen else batch).append(w)
                seen.add(w.key)
            self._pending[shard] = later
            if not batch:
                return  # all wait for a commit; `_committed` starts the next flush
            inflight.update(w.key for w in batch)
            errors: list[BaseException | None] = [None] * len(batch)

            def op(
                s: MirrorShard,
                batch: list[_PendingWrite] = batch,
                errors: list[BaseException | None] = errors,
            ) -> WriteResult[None]:
                records: list[Record] = []
                for i, w in enumerate(batch):
                    try:
                        records += s.write(w.key, w.state, w.epoch, w.label).records
                    except CoordinatorError as e:  # a forbidden transition: this write only
                        errors[i] = e
                return s.result_of(records) if records else WriteResult(None)

            t0 = time.monotonic()
            try:
                committed = await self.runtime.write_pipelined(shard, op)
            except Exception as e:  # not in the log (or not loaded): every write of the batch
                self._committed(shard, batch, [err or e for err in errors], t0)
                continue
            committed.add_done_callback(
                functools.partial(self._on_commit, shard, batch, errors, t0)
            )

    def _on_commit(
        self,
        shard: int,
        batch: list[_PendingWrite],
        errors: list[BaseException | None],
        t0: float,
        committed: "asyncio.Future[None]",
    ) -> None:
        failure = committed.exception()
        self._committed(shard, batch, [err or failure for err in errors], t0)

    def _committed(
        self,
        shard: int,
        batch: list[_PendingWrite],
        errors: list[BaseException | None],
        t0: float,
    ) -> None:
        inflight = self._inflight.get(shard, set())
        for w in batch:
            inflight.discard(w.key)
        log.debug(
            "__mirror_state-%d: %d writes committed in %.0f ms (%d waiting)",
            shard,
            len(batch),
            (time.monotonic() - t0) * 1000,
            len(self._pending.get(shard, ())),
        )
        for w, err in zip(batch, errors, strict=True):
            if w.done.done():
                continue
            if err is None:
                w.done.set_result(None)
            else:
                w.done.set_exception(err)
        if self._pending.get(shard):
            self._start_flush(shard)

    async def delete(self, mirror: str, topic_id: uuid.UUID, partition: int) -> None:
        """Tombstone the partition's state and LME records."""
        k = MirrorKey(mirror, topic_id, partition)
        await self.runtime.write(self.partition_for(*_fields(k)), lambda s: s.delete([k]))

    async def delete_matching(self, mirror: str, topic_id: uuid.UUID | None = None) -> int:
        """Tombstone every stored partition of `mirror` (of one topic if `topic_id`) held by the
        loaded shards; the count of partitions removed. For DeleteMirror and removed topics."""
        count = 0
        for p in self.loaded_partitions():
            shard = self._shards.get(p)
            if shard is None:
                continue
            keys = [
                k for k, _, _ in shard.entries(mirror) if topic_id is None or k.topic_id == topic_id
            ]
            if keys and await self._delete_on(p, keys):
                count += len(keys)
        return count

    async def _delete_on(self, partition: int, keys: list[MirrorKey]) -> bool:
        try:
            await self.runtime.write(partition, lambda s: s.delete(keys))
        except CoordinatorError:
            return False  # unloaded meanwhile: the new owner still has the records
        return True

    def states(self, mirror: str | None = None) -> list[MirrorStateEntry]:
        """Every stored mirror partition of the loaded shards (of one mirror if given)."""
        out: list[MirrorStateEntry] = []
        for p in self.loaded_partitions():
            shard = self._shards.get(p)
            if shard is None:
                continue
            out += [(_fields(k), state, lme) for k, state, lme in shard.entries(mirror)]
        out.sort(key=lambda e: (e[0][0], str(e[0][1]), e[0][2]))
        return out


def _fields(k: MirrorKey) -> tuple[str, uuid.UUID, int]:
    return k.mirror, k.topic_id, k.partition
