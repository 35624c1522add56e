"""Rebuilding KIP-848 consumer groups from their `__consumer_offsets` records (load)."""

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember
from broker.coordinator.group.reconcile import MemberAssignment, MemberState


def replay_record(
    groups: dict[str, ConsumerGroup],
    key: crec.GroupKey | crec.MemberRecordKey,
    value: bytes | None,
    now_ms: int,
) -> None:
    """Apply one consumer group record (a tombstone when `value` is None) while loading."""
    t = key.record_type
    if t == crec.PARTITION_METADATA:
        return
    gid = key.group
    group = groups.get(gid)
    if isinstance(key, crec.GroupKey):
        if t == crec.GROUP_METADATA:
            if value is None:
                groups.pop(gid, None)
                return
            group = group or groups.setdefault(gid, ConsumerGroup(gid, state_timestamp=now_ms))
            group.epoch, group.metadata_hash = crec.decode_group_metadata(value)
        elif value is not None and group is not None:
            group.assignment_epoch = crec.decode_target_metadata(value)
        return
    if group is None:
        if value is None:
            return
        group = groups.setdefault(gid, ConsumerGroup(gid))
    _replay_member(group, key, value)


def _replay_member(group: ConsumerGroup, key: crec.MemberRecordKey, value: bytes | None) -> None:
    mid, t = key.member_id, key.record_type
    if value is None:
        if t == crec.MEMBER_METADATA:
            group.remove(mid)
        elif t == crec.TARGET_MEMBER:
            group.targets.pop(mid, None)
        elif mid in group.members:
            group.set_current(mid, MemberAssignment(0, 0, MemberState.STABLE))
        return
    member = group.members.setdefault(mid, ConsumerMember(mid))
    if t == crec.MEMBER_METADATA:
        v = crec.decode_member_metadata(value)
        member.instance_id, member.rack_id = v.instance_id, v.rack_id
        member.client_id, member.client_host = v.client_id, v.client_host
        member.topic_names, member.topic_regex = v.topic_names, v.topic_regex
        member.rebalance_timeout_ms = v.rebalance_timeout_ms
        member.server_assignor = v.server_assignor
        member.classic = v.classic
    elif t == crec.TARGET_MEMBER:
        group.targets[mid] = crec.decode_target_member(value)
    else:
        c = crec.decode_current_member(value)
        try:
            state = MemberState(c.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.set_current(
            mid,
            MemberAssignment(
                c.member_epoch, c.previous_member_epoch, state, c.assigned, c.pending_revocation
            ),
        )
