"""DeleteGroups, DescribeGroups and ListGroups across a shard's classic, consumer and share
groups."""

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import CONSUMER_PROTOCOL_TYPE, GroupState
from broker.coordinator.group.consumer_describe import classic_bytes
from broker.coordinator.group.shard_state import ShardState
from broker.coordinator.group.share_groups import SHARE_PROTOCOL_TYPE
from broker.coordinator.runtime import Record, WriteResult, append_error_code


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember]


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


class GroupAdmin:
    """DeleteGroups, DescribeGroups and ListGroups over the shard's state."""

    def __init__(self, state: ShardState) -> None:
        self.state = state
        self.groups = state.groups
        self.offsets = state.offsets
        self.consumer = state.consumer
        self.share = state.share

    def delete_groups(self, group_ids: list[str]) -> WriteResult[dict[str, ErrorCode]]:
        results: dict[str, ErrorCode] = {}
        records: list[Record] = []
        doomed: list[str] = []
        for gid in group_ids:
            if gid in self.share.groups:
                code, share_records = self.share.delete(gid)
                results[gid] = code
                if code == ErrorCode.none:
                    records += share_records
                    doomed.append(gid)
                continue
            group = self.groups.get(gid)
            consumer = self.consumer.groups.get(gid)
            if consumer is None and (group is None or group.is_in(GroupState.DEAD)):
                results[gid] = ErrorCode.group_id_not_found
                continue
            live = (
                bool(consumer.members)
                if consumer
                else not (group and group.is_in(GroupState.EMPTY))
            )
            if live:
                results[gid] = ErrorCode.non_empty_group
                continue
            doomed_offsets = set(self.offsets.get(gid, {})) | self.state.pending_txn.partitions(gid)
            for topic, partition in sorted(doomed_offsets):
                records.append((rec.offset_key(gid, topic, partition), None))
            records += [(rec.group_key(gid), None)] if consumer is None else []
            records += self.consumer.delete_records(gid) if consumer else []
            doomed.append(gid)
            results[gid] = ErrorCode.none

        def committed() -> None:
            for gid in doomed:
                self.state.delete_group(gid)

        def failed(exc: BaseException) -> dict[str, ErrorCode]:
            code = append_error_code(exc)
            return {g: (code if g in doomed else e) for g, e in results.items()}

        return WriteResult(results, records, committed, failed)

    def describe(self, group_id: str) -> DescribedGroup:
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            topics = self.consumer.topics()
            members = [
                DescribedMember(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    *classic_bytes(m, topics),
                )
                for m in cg.members.values()
            ]
            return DescribedGroup(
                group_id, ErrorCode.none, cg.state(), CONSUMER_PROTOCOL_TYPE, "", members
            )
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return DescribedGroup(
                group_id, ErrorCode.group_id_not_found, GroupState.DEAD.value, "", "", []
            )
        stable = group.is_in(GroupState.STABLE)
        members = [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return DescribedGroup(
            group_id,
            ErrorCode.none,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def list_groups(self) -> list[ListedGroup]:
        return (
            [
                ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values()
                if not g.is_in(GroupState.DEAD)
            ]
            + [
                ListedGroup(gid, CONSUMER_PROTOCOL_TYPE, cg.state(), "consumer")
                for gid, cg in self.consumer.groups.items()
            ]
            + [
                ListedGroup(gid, SHARE_PROTOCOL_TYPE, sg.state(), "share")
                for gid, sg in self.share.groups.items()
            ]
        )
