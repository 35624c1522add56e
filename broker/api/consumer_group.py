"""KIP-848 consumer group RPCs, served by the `GroupCoordinator`.

Versions served (as Kafka 4.1): ConsumerGroupHeartbeat v0-1, ConsumerGroupDescribe v0-1.
v1 of the heartbeat adds SubscribedTopicRegex and has the client make up the member id (v0: the
coordinator may); ConsumerGroupDescribe v1 adds the member type.

With an authorizer (as Kafka): the heartbeat needs READ on the group, describe DESCRIBE
(GROUP_AUTHORIZATION_FAILED).
"""

import dataclasses
import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from broker.api.context import RequestContext
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.consumer_describe import DescribedConsumerGroup, NamedPartitions
from broker.coordinator.group.consumer_shard import HeartbeatParams, HeartbeatResult
from broker.security.acls import AclOperation, ResourceType
from broker.security.authorizer import Authorizer
from protocol.registry import REGISTRY

from .authz import allowed
from .dispatcher import Api
from .group_heartbeat_response import NO_THROTTLE, heartbeat_response

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

SERVED_VERSIONS: dict[int, range] = {
    CONSUMER_GROUP_HEARTBEAT: range(0, 2),
    CONSUMER_GROUP_DESCRIBE: range(0, 2),
}

_CLASSIC_MEMBER, _CONSUMER_MEMBER = i8(0), i8(1)


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _build(cls: type, **values: Any) -> Any:
    """Instantiate a kio dataclass with the values its version has (others are dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _owned(parts: Any) -> dict[uuid.UUID, frozenset[int]] | None:
    if parts is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in parts:
        if tp.topic_id is not None and tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


class ConsumerGroupApi:
    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(CONSUMER_GROUP_HEARTBEAT, self.handle_heartbeat, max_version=1),
            Api(CONSUMER_GROUP_DESCRIBE, self.handle_describe, max_version=1),
        ]

    def _denied(self, ctx: RequestContext, op: AclOperation, group_id: str) -> bool:
        a = self.authorizer
        return a is not None and not allowed(a, ctx, op, ResourceType.GROUP, group_id)

    async def handle_heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        version = int(type(req).__version__)
        resp_cls = REGISTRY.spec(CONSUMER_GROUP_HEARTBEAT).response_type(version)
        if self._denied(ctx, AclOperation.READ, req.group_id):
            result = HeartbeatResult(ErrorCode.group_authorization_failed)
        else:
            names = req.subscribed_topic_names
            result = await self.coordinator.consumer_group_heartbeat(
                HeartbeatParams(
                    group_id=req.group_id,
                    member_id=req.member_id,
                    member_epoch=int(req.member_epoch),
                    instance_id=req.instance_id,
                    rack_id=req.rack_id,
                    rebalance_timeout_ms=_ms(req.rebalance_timeout),
                    topic_names=None if names is None else tuple(names),
                    topic_regex=getattr(req, "subscribed_topic_regex", None),  # v1+
                    server_assignor=req.server_assignor,
                    owned=_owned(req.topic_partitions),
                    client_id=ctx.client_id or "",
                    client_host=f"/{ctx.peer_host}",  # Kafka's InetAddress.toString()
                    api_version=version,
                )
            )
        return heartbeat_response(resp_cls, result, result.error == ErrorCode.none)

    async def handle_describe(self, ctx: RequestContext, req: Any) -> Any:
        version = int(type(req).__version__)
        resp_cls = REGISTRY.spec(CONSUMER_GROUP_DESCRIBE).response_type(version)
        mod = __import__(resp_cls.__module__, fromlist=["DescribedGroup"])
        groups = []
        for group_id in req.group_ids:
            if self._denied(ctx, AclOperation.DESCRIBE, group_id):
                found = DescribedConsumerGroup(group_id, ErrorCode.group_authorization_failed)
            else:
                found = await self.coordinator.consumer_group_describe(group_id)
            groups.append(self._group(mod, found))
        return resp_cls(throttle_time=NO_THROTTLE, groups=tuple(groups))

    @staticmethod
    def _group(mod: Any, g: DescribedConsumerGroup) -> Any:
        def assignment(parts: NamedPartitions) -> Any:
            return mod.Assignment(
                topic_partitions=tuple(
                    mod.TopicPartitions(
                        topic_id=t, topic_name=name, partitions=tuple(i32(p) for p in ps)
                    )
                    for t, name, ps in parts
                )
            )

        members = tuple(
            _build(
                mod.Member,
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=i32(m.member_epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(m.topic_names),
                subscribed_topic_regex=m.topic_regex,
                assignment=assignment(m.assignment),
                target_assignment=assignment(m.target),
                member_type=_CLASSIC_MEMBER if m.classic else _CONSUMER_MEMBER,
            )
            for m in g.members
        )
        return mod.DescribedGroup(
            error_code=g.error,
            error_message=g.message,
            group_id=g.group_id,
            group_state=g.state,
            group_epoch=i32(g.epoch),
            assignment_epoch=i32(g.assignment_epoch),
            assignor_name=g.assignor,
            members=members,
        )
