"""Loading a shard: replaying the records of its `__consumer_offsets` partition (offsets, the
classic groups, and the consumer and share groups' records), transactional offsets up to their
marker, and what starts or stops when the shard is loaded or unloaded."""

from kio.schema.errors import ErrorCode

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group import records as rec
from broker.coordinator.group import share_records as srec
from broker.coordinator.group.classic import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from broker.coordinator.group.classic_rebalance import ClassicRebalance
from broker.coordinator.group.offset_retention import OffsetRetention
from broker.coordinator.group.shard_state import ShardState


class ShardLoading:
    """Replays the shard's records into its state; loading restarts the members' heartbeat
    timers (`rebalance`) and the offset expiry timer (`retention`)."""

    def __init__(
        self, state: ShardState, rebalance: ClassicRebalance, retention: OffsetRetention
    ) -> None:
        self.state = state
        self.groups = state.groups
        self.offsets = state.offsets
        self.pending_txn = state.pending_txn
        self.consumer = state.consumer
        self.share = state.share
        self.rebalance = rebalance
        self.retention = retention

    def replay(self, key: bytes, value: bytes | None) -> None:
        k = rec.decode_key(key)
        if k is None:
            ck = crec.decode_key(key)
            if ck is not None:
                self.consumer.replay(ck, value)
                classic = self.groups.get(ck.group)
                if ck.group in self.consumer.groups and classic and classic.is_in(GroupState.EMPTY):
                    del self.groups[ck.group]  # the placeholder its offsets made
                return
            sk = srec.decode_key(key)
            if sk is not None:
                self.share.replay(sk, value)
            return
        if isinstance(k, rec.OffsetKey):
            tp = (k.topic, k.partition)
            if value is None:
                self.pending_txn.drop_partition(k.group, tp)
                group_offsets = self.offsets.get(k.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
                    if not group_offsets:
                        del self.offsets[k.group]
            else:
                self.offsets.setdefault(k.group, {})[tp] = rec.decode_offset_value(value)
                self.pending_txn.on_plain_commit(k.group, tp)
                self.state.ensure_group(k.group)
        elif isinstance(k, rec.GroupKey):
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = _group_from_record(
                    k.group, rec.decode_group_value(value), self.state.now()
                )

    def replay_transactional(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        """A record of a TxnOffsetCommit batch: pending until the producer's marker."""
        k = rec.decode_key(key)
        if not isinstance(k, rec.OffsetKey) or value is None:
            self.replay(key, value)
            return
        self.pending_txn.add(
            producer_id, k.group, (k.topic, k.partition), rec.decode_offset_value(value)
        )
        self.state.ensure_group(k.group)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        self.state.complete_transaction(producer_id, commit)

    def on_loaded(self) -> None:
        # Reloaded members keep their generation but must heartbeat within their session.
        for group in self.groups.values():
            for member in group.members.values():
                self.rebalance.reschedule_heartbeat(group, member)
        self.consumer.on_loaded()
        self.share.on_loaded()
        self.retention.schedule_expiry()

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                member.complete_join(
                    JoinResult(ErrorCode.not_coordinator, member_id=member.member_id)
                )
                member.complete_sync(SyncResult(ErrorCode.not_coordinator))
        self.groups.clear()
        self.consumer.on_unloaded()
        self.share.on_unloaded()
        self.offsets.clear()
        self.pending_txn.clear()


def _group_from_record(group_id: str, v: rec.GroupValue, now_ms: int) -> ClassicGroup:
    ts = v.current_state_timestamp if v.current_state_timestamp >= 0 else now_ms
    group = ClassicGroup(group_id, ts)
    group.generation = v.generation
    group.protocol_type = v.protocol_type or None
    group.protocol_name = v.protocol
    for m in v.members:
        member = Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=(
                m.rebalance_timeout_ms if m.rebalance_timeout_ms >= 0 else m.session_timeout_ms
            ),
            session_timeout_ms=m.session_timeout_ms,
            protocols=[(v.protocol or "", m.subscription)],
            assignment=m.assignment,
        )
        group.add(member, v.protocol_type)
    group.leader_id = v.leader if v.leader in group.members else group.leader_id
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    return group
