"""Classic group RPCs, served by a `GroupCoordinator`.

Versions served (Kafka 4.1's stable maxima): JoinGroup v0-9, SyncGroup v0-5,
Heartbeat v0-4, LeaveGroup v0-5, OffsetCommit v2-9, OffsetFetch v1-9, DescribeGroups v0-6,
ListGroups v0-5, DeleteGroups v0-2, OffsetDelete v0.

Each handler takes a kio request of any served version and returns the response type of
the same version; fields a version lacks are simply not set.

With an authorizer (as Kafka): Join/Sync/Heartbeat/Leave and OffsetCommit need READ on the group,
OffsetFetch and DescribeGroups DESCRIBE, DeleteGroups and OffsetDelete DELETE
(GROUP_AUTHORIZATION_FAILED); committed or deleted offsets need READ on their topic and fetched
ones DESCRIBE (TOPIC_AUTHORIZATION_FAILED; a fetch of all offsets leaves those topics out).
ListGroups lists every group with DESCRIBE on the cluster, else the groups the principal may
DESCRIBE.
"""

import dataclasses
import datetime
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.context import RequestContext
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.shard import CommitItem, CommitParams, JoinParams, SyncParams
from broker.security.acls import AclOperation, ResourceType
from broker.security.authorizer import Authorizer
from protocol.registry import REGISTRY

from .authz import allowed, allowed_on_cluster
from .dispatcher import Api

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH = 8, 9
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47

SERVED_VERSIONS: dict[int, range] = {
    JOIN_GROUP: range(0, 10),
    SYNC_GROUP: range(0, 6),
    HEARTBEAT: range(0, 5),
    LEAVE_GROUP: range(0, 6),
    OFFSET_COMMIT: range(2, 10),
    OFFSET_FETCH: range(1, 10),
    DESCRIBE_GROUPS: range(0, 7),
    LIST_GROUPS: range(0, 6),
    DELETE_GROUPS: range(0, 3),
    OFFSET_DELETE: range(0, 1),
}

_NO_THROTTLE = datetime.timedelta(0)


@cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(cls: type, **values: Any) -> Any:
    """Instantiate a kio dataclass with the values its version has (others are dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _item_type(cls: type, field: str) -> Any:
    """Element class of a tuple-typed field (`tuple[X, ...]`, maybe `| None`)."""
    hint = _field_types(cls)[field]
    options = typing.get_args(hint) if typing.get_origin(hint) is not tuple else (hint,)
    for option in options:
        if typing.get_origin(option) is tuple:
            return typing.get_args(option)[0]
    raise TypeError(f"{cls.__name__}.{field} is not a tuple field")


def _response_type(api_key: int, req: Any) -> type:
    version = int(type(req).__version__)
    return REGISTRY.spec(api_key).response_type(version)


def _version(req: Any) -> int:
    return int(type(req).__version__)


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


_GROUP_DENIED = ErrorCode.group_authorization_failed


class GroupApi:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        topic_exists: Callable[[str], bool],
        authorizer: Authorizer | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.topic_exists = topic_exists
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(11, self.handle_join_group, max_version=9),
            Api(14, self.handle_sync_group, max_version=5),
            Api(12, self.handle_heartbeat, max_version=4),
            Api(13, self.handle_leave_group, max_version=5),
            Api(8, self.handle_offset_commit, min_version=2, max_version=9),
            Api(9, self.handle_offset_fetch, min_version=1, max_version=9),
            Api(15, self.handle_describe_groups, max_version=6),
            Api(16, self.handle_list_groups, max_version=5),
            Api(42, self.handle_delete_groups, max_version=2),
            Api(47, self.handle_offset_delete, max_version=0),
        ]

    def _group_denied(self, ctx: RequestContext, op: AclOperation, group_id: str) -> bool:
        a = self.authorizer
        return a is not None and not allowed(a, ctx, op, ResourceType.GROUP, group_id)

    def _topic_denied(self, ctx: RequestContext, op: AclOperation, topic: str) -> bool:
        a = self.authorizer
        return a is not None and not allowed(a, ctx, op, ResourceType.TOPIC, topic)

    async def handle_join_group(self, ctx: RequestContext, req: Any) -> Any:
        version = _version(req)
        resp_cls = _response_type(JOIN_GROUP, req)
        if self._group_denied(ctx, AclOperation.READ, req.group_id):
            return _build(
                resp_cls,
                throttle_time=_NO_THROTTLE,
                error_code=_GROUP_DENIED,
                generation_id=-1,
                protocol_name=None if version >= 7 else "",
                leader="",
                member_id="",
                members=(),
            )
        session = _ms(req.session_timeout)
        # v0 has no rebalance timeout: it is the session timeout
        rebalance = (
            _ms(getattr(req, "rebalance_timeout", req.session_timeout)) if version >= 1 else session
        )
        params = JoinParams(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            client_id=ctx.client_id,
            client_host=f"/{ctx.peer_host}",  # Kafka's InetAddress.toString()
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocol_type=req.protocol_type,
            protocols=[(p.name, p.metadata) for p in req.protocols],
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
        )
        result = await self.coordinator.join_group(params)
        member_cls = _item_type(resp_cls, "members")
        members = tuple(
            _build(member_cls, member_id=mid, group_instance_id=iid, metadata=meta)
            for mid, iid, meta in result.members
        )
        protocol_name = result.protocol_name
        if version < 7 and protocol_name is None:
            protocol_name = ""  # not nullable before v7
        return _build(
            resp_cls,
            throttle_time=_NO_THROTTLE,
            error_code=result.error,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=protocol_name,
            leader=result.leader,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=members,
        )

    async def handle_sync_group(self, ctx: RequestContext, req: Any) -> Any:
        resp_cls = _response_type(SYNC_GROUP, req)
        if self._group_denied(ctx, AclOperation.READ, req.group_id):
            return _build(
                resp_cls, throttle_time=_NO_THROTTLE, error_code=_GROUP_DENIED, assignment=b""
            )
        params = SyncParams(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            protocol_type=getattr(req, "protocol_type", None),
            protocol_name=getattr(req, "protocol_name", None),
            assignments={a.member_id: a.assignment for a in req.assignments},
        )
        result = await self.coordinator.sync_group(params)
        return _build(
            resp_cls,
            throttle_time=_NO_THROTTLE,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    async def handle_heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        if self._group_denied(ctx, AclOperation.READ, req.group_id):
            return _build(
                _response_type(HEARTBEAT, req), throttle_time=_NO_THROTTLE, error_code=_GROUP_DENIED
            )
        error = await self.coordinator.heartbeat(
            req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)
        )
        return _build(_response_type(HEARTBEAT, req), throttle_time=_NO_THROTTLE, error_code=error)

    async def handle_leave_group(self, ctx: RequestContext, req: Any) -> Any:
        resp_cls = _response_type(LEAVE_GROUP, req)
        if self._group_denied(ctx, AclOperation.READ, req.group_id):
            return _build(
                resp_cls, throttle_time=_NO_THROTTLE, error_code=_GROUP_DENIED, members=()
            )
        if _version(req) < 3:
            error, errors = await self.coordinator.leave_group(
                req.group_id, [(req.member_id, None)]
            )
            if error == ErrorCode.none and errors:
                error = errors[0]
            return _build(resp_cls, throttle_time=_NO_THROTTLE, error_code=error)
        idents = [(m.member_id, m.group_instance_id) for m in req.members]
        error, errors = await self.coordinator.leave_group(req.group_id, idents)
        member_cls = _item_type(resp_cls, "members")
        members = tuple(
            _build(member_cls, member_id=mid, group_instance_id=iid, error_code=err)
            for (mid, iid), err in zip(idents, errors, strict=False)
        )
        return _build(resp_cls, throttle_time=_NO_THROTTLE, error_code=error, members=members)

    async def handle_offset_commit(self, ctx: RequestContext, req: Any) -> Any:
        version = _version(req)
        resp_cls = _response_type(OFFSET_COMMIT, req)
        topic_cls = _item_type(resp_cls, "topics")
        part_cls = _item_type(topic_cls, "partitions")
        items: list[CommitItem] = []
        # (topic, partition, error or None = ask the coordinator)
        slots: list[tuple[str, int, ErrorCode | None]] = []
        group_denied = self._group_denied(ctx, AclOperation.READ, req.group_id)
        for topic in req.topics:
            exists = self.topic_exists(topic.name)
            denied: ErrorCode | None = None
            if group_denied:
                denied = _GROUP_DENIED
            elif self._topic_denied(ctx, AclOperation.READ, topic.name):
                denied = ErrorCode.topic_authorization_failed
            for p in topic.partitions:
                if denied is not None:
                    slots.append((topic.name, p.partition_index, denied))
                    continue
                if not exists:
                    slots.append(
                        (topic.name, p.partition_index, ErrorCode.unknown_topic_or_partition)
                    )
                    continue
                items.append(
                    CommitItem(
                        topic.name,
                        p.partition_index,
                        p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1),
                        p.committed_metadata,
                    )
                )
                slots.append((topic.name, p.partition_index, None))
        retention = getattr(req, "retention_time", -1)
        params = CommitParams(
            group_id=req.group_id,
            generation_id=getattr(req, "generation_id_or_member_epoch", -1),
            member_id=getattr(req, "member_id", ""),
            group_instance_id=getattr(req, "group_instance_id", None),
            retention_ms=_ms(retention),
            items=items,
            api_version=version,
        )
        errors = iter(await self.coordinator.commit_offsets(params) if items else [])
        by_topic: dict[str, list[Any]] = {}
        for name, partition, error in slots:
            code = error if error is not None else next(errors)
            by_topic.setdefault(name, []).append(
                _build(part_cls, partition_index=partition, error_code=code)
            )
        topics = tuple(
            _build(topic_cls, name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        )
        return _build(resp_cls, throttle_time=_NO_THROTTLE, topics=topics)

    async def _fetch_group(
        self,
        ctx: RequestContext,
        group_id: str,
        topics: Any,
        topic_cls: type,
        part_cls: type,
        require_stable: bool = False,
        member: tuple[str | None, int] | None = None,
    ) -> tuple[ErrorCode, tuple[Any, ...]]:
        if self._group_denied(ctx, AclOperation.DESCRIBE, group_id):
            return _GROUP_DENIED, ()
        denied = (
            set()
            if topics is None
            else {t.name for t in topics if self._topic_denied(ctx, AclOperation.DESCRIBE, t.name)}
        )
        wanted = (
            None
            if topics is None
            else [(t.name, list(t.partition_indexes)) for t in topics if t.name not in denied]
        )
        error, found = await self.coordinator.fetch_offsets(
            group_id, wanted, require_stable, member
        )
        if error != ErrorCode.none:
            return error, ()
        if topics is None and self.authorizer is not None:
            found = [
                (name, offsets)
                for name, offsets in found
                if not self._topic_denied(ctx, AclOperation.DESCRIBE, name)
            ]
        refused = tuple(
            _build(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    _build(
                        part_cls,
                        partition_index=p,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.topic_authorization_failed,
                    )
                    for p in t.partition_indexes
                ),
            )
            for t in topics or ()
            if t.name in denied
        )
        out = refused + tuple(
            _build(
                topic_cls,
                name=name,
                partitions=tuple(
                    _build(
                        part_cls,
                        partition_index=o.partition,
                        committed_offset=o.offset,
                        committed_leader_epoch=o.leader_epoch,
                        metadata=o.metadata,
                        error_code=o.error,
                    )
                    for o in offsets
                ),
            )
            for name, offsets in found
        )
        return ErrorCode.none, out

    async def handle_offset_fetch(self, ctx: RequestContext, req: Any) -> Any:
        # require_stable (v7+, read_committed consumers): a partition with transactional offsets
        # still pending answers UNSTABLE_OFFSET_COMMIT, and the client retries (KIP-447)
        stable = bool(getattr(req, "require_stable", False))
        resp_cls = _response_type(OFFSET_FETCH, req)
        if _version(req) >= 8:
            group_cls = _item_type(resp_cls, "groups")
            topic_cls = _item_type(group_cls, "topics")
            part_cls = _item_type(topic_cls, "partitions")
            groups = []
            for g in req.groups:
                # v9: a consumer-protocol member names itself and its epoch
                member = (g.member_id, g.member_epoch) if hasattr(g, "member_epoch") else None
                error, topics = await self._fetch_group(
                    ctx, g.group_id, g.topics, topic_cls, part_cls, stable, member
                )
                groups.append(
                    _build(group_cls, group_id=g.group_id, topics=topics, error_code=error)
                )
            return _build(resp_cls, throttle_time=_NO_THROTTLE, groups=tuple(groups))
        topic_cls = _item_type(resp_cls, "topics")
        part_cls = _item_type(topic_cls, "partitions")
        error, topics = await self._fetch_group(
            ctx, req.group_id, req.topics, topic_cls, part_cls, stable
        )
        return _build(resp_cls, throttle_time=_NO_THROTTLE, error_code=error, topics=topics)

    async def handle_describe_groups(self, ctx: RequestContext, req: Any) -> Any:
        version = _version(req)
        resp_cls = _response_type(DESCRIBE_GROUPS, req)
        group_cls = _item_type(resp_cls, "groups")
        member_cls = _item_type(group_cls, "members")
        described = []
        for gid in req.groups:
            if self._group_denied(ctx, AclOperation.DESCRIBE, gid):
                described.append(
                    _build(
                        group_cls,
                        error_code=_GROUP_DENIED,
                        error_message=f"Not authorized to describe group {gid}.",
                        group_id=gid,
                        group_state="",
                        protocol_type="",
                        protocol_data="",
                        members=(),
                    )
                )
                continue
            d = await self.coordinator.describe_group(gid)
            error = d.error
            message = None
            if error == ErrorCode.group_id_not_found:
                if version < 6:
                    error = ErrorCode.none  # older versions describe a missing group as Dead
                else:
                    message = f"Group {gid} not found."
            members = tuple(
                _build(
                    member_cls,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in d.members
            )
            described.append(
                _build(
                    group_cls,
                    error_code=error,
                    error_message=message,
                    group_id=gid,
                    group_state=d.state,
                    protocol_type=d.protocol_type,
                    protocol_data=d.protocol_data,
                    members=members,
                )
            )
        return _build(resp_cls, throttle_time=_NO_THROTTLE, groups=tuple(described))

    async def handle_list_groups(self, ctx: RequestContext, req: Any) -> Any:
        resp_cls = _response_type(LIST_GROUPS, req)
        listed_cls = _item_type(resp_cls, "groups")
        states = {s.lower() for s in getattr(req, "states_filter", ())}
        types = {t.lower() for t in getattr(req, "types_filter", ())}
        error, groups = await self.coordinator.list_groups()
        if self.authorizer is not None and not allowed_on_cluster(
            self.authorizer, ctx, AclOperation.DESCRIBE
        ):
            groups = [
                g for g in groups if not self._group_denied(ctx, AclOperation.DESCRIBE, g.group_id)
            ]
        out = tuple(
            _build(
                listed_cls,
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in groups
            if (not states or g.state.lower() in states) and (not types or g.group_type in types)
        )
        return _build(resp_cls, throttle_time=_NO_THROTTLE, error_code=error, groups=out)

    async def handle_delete_groups(self, ctx: RequestContext, req: Any) -> Any:
        resp_cls = _response_type(DELETE_GROUPS, req)
        result_cls = _item_type(resp_cls, "results")
        names = list(dict.fromkeys(req.groups_names))
        denied = {g for g in names if self._group_denied(ctx, AclOperation.DELETE, g)}
        results: dict[str, ErrorCode] = dict.fromkeys(denied, _GROUP_DENIED)
        results.update(await self.coordinator.delete_groups([g for g in names if g not in denied]))
        out = tuple(_build(result_cls, group_id=gid, error_code=results[gid]) for gid in names)
        return _build(resp_cls, throttle_time=_NO_THROTTLE, results=out)

    async def handle_offset_delete(self, ctx: RequestContext, req: Any) -> Any:
        resp_cls = _response_type(OFFSET_DELETE, req)
        topic_cls = _item_type(resp_cls, "topics")
        part_cls = _item_type(topic_cls, "partitions")
        if self._group_denied(ctx, AclOperation.DELETE, req.group_id):
            return _build(resp_cls, error_code=_GROUP_DENIED, throttle_time=_NO_THROTTLE, topics=())
        denied = {t.name for t in req.topics if self._topic_denied(ctx, AclOperation.READ, t.name)}
        wanted: list[tuple[str, int]] = []
        for t in req.topics:
            if self.topic_exists(t.name) and t.name not in denied:
                wanted += [(t.name, p.partition_index) for p in t.partitions]
        error, errors = await self.coordinator.delete_offsets(req.group_id, wanted)
        if error != ErrorCode.none:
            return _build(resp_cls, error_code=error, throttle_time=_NO_THROTTLE, topics=())
        codes = iter(errors)
        topics = []
        for t in req.topics:
            exists = self.topic_exists(t.name)
            parts = tuple(
                _build(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=ErrorCode.topic_authorization_failed
                    if t.name in denied
                    else (next(codes) if exists else ErrorCode.unknown_topic_or_partition),
                )
                for p in t.partitions
            )
            topics.append(_build(topic_cls, name=t.name, partitions=parts))
        return _build(
            resp_cls, error_code=ErrorCode.none, throttle_time=_NO_THROTTLE, topics=tuple(topics)
        )
