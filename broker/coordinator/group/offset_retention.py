"""Offset retention: a periodic timer drops expired offsets, then the empty groups left without
any (Kafka's cleanup)."""

from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.shard_state import ShardState, TopicPartition
from broker.coordinator.group.timers import Timers
from broker.coordinator.runtime import Record, WriteResult

_EXPIRE_OFFSETS_KEY = "expire-offsets"


class OffsetRetention:
    def __init__(
        self, state: ShardState, config: GroupConfig, timers: "Timers[OffsetRetention]"
    ) -> None:
        self.state = state
        self.groups = state.groups
        self.offsets = state.offsets
        self.consumer = state.consumer
        self.pending_txn = state.pending_txn
        self.config = config
        self.timers = timers

    def schedule_expiry(self) -> None:
        """The next periodic check (the shard is loaded: the check runs from now on)."""
        self.timers.schedule(
            _EXPIRE_OFFSETS_KEY,
            self.config.offsets_retention_check_interval_ms,
            lambda r: r.expire_offsets(),
        )

    def _expired(
        self, group: ClassicGroup | None, tp: TopicPartition, v: rec.OffsetValue, now: int
    ) -> bool:
        if v.expire_timestamp is not None:
            return now >= v.expire_timestamp
        retention = self.config.offsets_retention_ms
        if group is None or group.protocol_type is None:
            return now - v.commit_timestamp >= retention  # simple group
        if group.is_in(GroupState.EMPTY):
            base = group.state_timestamp if group.state_timestamp >= 0 else v.commit_timestamp
            return now - base >= retention
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            topics = group.subscribed_topics()
            if topics is not None and tp[0] not in topics:
                return now - v.commit_timestamp >= retention
        return False

    def expire_offsets(self) -> WriteResult[None]:
        """Drop expired offsets, then empty groups left without offsets (Kafka's cleanup)."""
        self.schedule_expiry()
        now = self.state.now()
        expired: dict[str, list[TopicPartition]] = {}
        records: list[Record] = []
        for gid, offsets in self.offsets.items():
            group = self.groups.get(gid)
            cg = self.consumer.groups.get(gid)
            if cg is not None and cg.members:
                continue  # a live consumer group keeps its offsets
            if cg is not None:  # an empty one keeps them for the retention after emptying
                group = ClassicGroup(gid, cg.state_timestamp)
                group.protocol_type = CONSUMER_PROTOCOL_TYPE
            for tp, v in offsets.items():
                # an offset a pending transaction may still replace does not expire yet
                if self._expired(group, tp, v, now) and not self.pending_txn.has_pending(gid, tp):
                    expired.setdefault(gid, []).append(tp)
                    records.append((rec.offset_key(gid, tp[0], tp[1]), None))
        dead_groups = [
            gid
            for gid, g in self.groups.items()
            if g.is_in(GroupState.EMPTY)
            and len(expired.get(gid, [])) == len(self.offsets.get(gid, {}))
            and not self.pending_txn.has_group(gid)
        ]
        records += [(rec.group_key(gid), None) for gid in dead_groups]
        dead_consumer = [
            gid
            for gid, cg in self.consumer.groups.items()
            if not cg.members
            and len(expired.get(gid, [])) == len(self.offsets.get(gid, {}))
            and not self.pending_txn.has_group(gid)
        ]
        for gid in dead_consumer:
            records += self.consumer.delete_records(gid)

        def committed() -> None:
            for gid, tps in expired.items():
                self.state.drop_offsets(gid, tps)
            for gid in dead_groups:
                group = self.groups.get(gid)
                if group is not None and group.is_in(GroupState.EMPTY) and gid not in self.offsets:
                    self.state.delete_group(gid)
            for gid in dead_consumer:
                cg = self.consumer.groups.get(gid)
                if cg is not None and not cg.members and gid not in self.offsets:
                    self.state.delete_group(gid)

        return WriteResult(None, records, on_commit=committed, on_failure=lambda exc: None)
