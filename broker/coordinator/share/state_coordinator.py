"""The share coordinator (KIP-932): share-partition states kept in `__share_group_state`, one
shard per partition of that topic, a share-partition routed to the partition its key
``<group>:<topic id>:<partition>`` hashes to (Kafka's key and hash, so both agree on the node).

A state is one ShareSnapshot record per write (the latest wins; compaction keeps it). Writes
from a leader with an older leader epoch than the stored one are fenced (FENCED_LEADER_EPOCH),
and a state epoch other than the stored one is FENCED_STATE_EPOCH, as Kafka's share coordinator.
Errors are raised as `CoordinatorError` (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, the
mapped append error).
"""

from kio.schema.errors import ErrorCode

from broker.coordinator.mirror.coordinator import kafka_uuid_str
from broker.coordinator.runtime import (
    CoordinatorError,
    CoordinatorRuntime,
    Record,
    RecordLog,
    ShardContext,
    WriteResult,
    append_error_code,
    partition_for,
)
from broker.coordinator.share import state_records as rec
from broker.coordinator.share.state_records import ShareKey, ShareSnapshot
from broker.coordinator.timer import LoopScheduler, Scheduler

SHARE_STATE_TOPIC = "__share_group_state"


def coordinator_key(k: ShareKey) -> str:
    """Kafka's SharePartitionKey as a coordinator key: ``<group>:<topic id>:<partition>``."""
    return f"{k.group_id}:{kafka_uuid_str(k.topic_id)}:{k.partition}"


class ShareStateShard:
    def __init__(self, ctx: "ShardContext[ShareStateShard]") -> None:
        self.ctx = ctx
        self.states: dict[ShareKey, ShareSnapshot] = {}

    def replay(self, key: bytes, value: bytes | None) -> None:
        k = rec.decode_key(key)
        if k is None:
            return
        if value is None:
            self.states.pop(k, None)
        else:
            self.states[k] = rec.decode_value(value)

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        self.states.clear()

    def read(self, k: ShareKey) -> ShareSnapshot | None:
        return self.states.get(k)

    def write(self, k: ShareKey, s: ShareSnapshot) -> WriteResult[None]:
        old = self.states.get(k)
        if old is not None:
            if s.leader_epoch < old.leader_epoch:
                raise CoordinatorError(ErrorCode.fenced_leader_epoch, "an older leader's write")
            if s.state_epoch != old.state_epoch:
                raise CoordinatorError(ErrorCode.fenced_state_epoch, "another state epoch")
        now = self.ctx.now_ms()
        s = ShareSnapshot(
            state_epoch=s.state_epoch,
            leader_epoch=s.leader_epoch,
            start_offset=s.start_offset,
            batches=s.batches,
            snapshot_epoch=0 if old is None else old.snapshot_epoch + 1,
            create_timestamp=now if old is None else old.create_timestamp,
            write_timestamp=now,
        )
        records: list[Record] = [(rec.snapshot_key(k), rec.snapshot_value(s))]
        return self._result(records)

    def initialize(self, k: ShareKey, state_epoch: int, start_offset: int) -> WriteResult[None]:
        """A new state epoch at a start offset, nothing in flight (InitializeShareGroupState):
        the leader's next write with the old state epoch is fenced, so it reads this."""
        old = self.states.get(k)
        if old is not None and state_epoch < old.state_epoch:
            raise CoordinatorError(ErrorCode.fenced_state_epoch, "an older state epoch")
        now = self.ctx.now_ms()
        s = ShareSnapshot(
            state_epoch=state_epoch,
            leader_epoch=-1,
            start_offset=start_offset,
            snapshot_epoch=0 if old is None else old.snapshot_epoch + 1,
            create_timestamp=now,
            write_timestamp=now,
        )
        return self._result([(rec.snapshot_key(k), rec.snapshot_value(s))])

    def delete(self, k: ShareKey) -> WriteResult[None]:
        if k not in self.states:
            return WriteResult(None)
        return self._result([(rec.snapshot_key(k), None)])

    def _result(self, records: list[Record]) -> WriteResult[None]:
        def commit() -> None:
            for key, value in records:
                self.replay(key, value)

        def fail(exc: BaseException) -> None:
            raise CoordinatorError(append_error_code(exc), str(exc)) from exc

        return WriteResult(None, records, on_commit=commit, on_failure=fail)


class ShareStateCoordinator:
    def __init__(self, num_partitions: int, scheduler: Scheduler | None = None) -> None:
        self.runtime: CoordinatorRuntime[ShareStateShard] = CoordinatorRuntime(
            num_partitions, ShareStateShard, scheduler or LoopScheduler()
        )

    def partition_for(self, k: ShareKey) -> int:
        return partition_for(coordinator_key(k), self.runtime.num_partitions)

    async def load(self, partition: int, log: RecordLog) -> None:
        await self.runtime.load(partition, log)

    async def unload(self, partition: int) -> None:
        await self.runtime.unload(partition)

    async def close(self) -> None:
        await self.runtime.close()

    async def read(self, k: ShareKey) -> ShareSnapshot | None:
        return await self.runtime.read(self.partition_for(k), lambda s: s.read(k))

    async def write(self, k: ShareKey, snapshot: ShareSnapshot) -> None:
        await self.runtime.write(self.partition_for(k), lambda s: s.write(k, snapshot))

    async def initialize(self, k: ShareKey, state_epoch: int, start_offset: int) -> None:
        await self.runtime.write(
            self.partition_for(k), lambda s: s.initialize(k, state_epoch, start_offset)
        )

    async def delete(self, k: ShareKey) -> None:
        await self.runtime.write(self.partition_for(k), lambda s: s.delete(k))
