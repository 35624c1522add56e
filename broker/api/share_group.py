"""KIP-932 share group membership RPCs, served by the `GroupCoordinator` (the node that
FindCoordinator with key type GROUP names for the group).

Versions served (as Kafka 4.1, the versions librdkafka 2.16's ShareConsumer sends):
ShareGroupHeartbeat v1, ShareGroupDescribe v1 (v0 was the early-access version, never in kio).
The client makes up its member id; the coordinator answers with the member epoch and, on joining
or when it changed, the member's assignment (partitions are shared between members).

With an authorizer (as Kafka): the heartbeat needs READ on the group, describe DESCRIBE
(GROUP_AUTHORIZATION_FAILED).
"""

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.context import RequestContext
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.share_groups import (
    DescribedShareGroup,
    ShareHeartbeatParams,
    ShareHeartbeatResult,
)
from broker.security.acls import AclOperation, ResourceType
from broker.security.authorizer import Authorizer
from protocol.registry import REGISTRY

from .authz import allowed
from .dispatcher import Api
from .group_heartbeat_response import NO_THROTTLE, heartbeat_response

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77
VERSION = 1


class ShareGroupApi:
    def __init__(self, coordinator: GroupCoordinator, authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(
                SHARE_GROUP_HEARTBEAT,
                self.handle_heartbeat,
                min_version=VERSION,
                max_version=VERSION,
            ),
            Api(
                SHARE_GROUP_DESCRIBE, self.handle_describe, min_version=VERSION, max_version=VERSION
            ),
        ]

    def _denied(self, ctx: RequestContext, op: AclOperation, group_id: str) -> bool:
        a = self.authorizer
        return a is not None and not allowed(a, ctx, op, ResourceType.GROUP, group_id)

    async def handle_heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        resp_cls = REGISTRY.spec(SHARE_GROUP_HEARTBEAT).response_type(VERSION)
        if self._denied(ctx, AclOperation.READ, req.group_id):
            result = ShareHeartbeatResult(ErrorCode.group_authorization_failed)
        else:
            names = req.subscribed_topic_names
            result = await self.coordinator.share_group_heartbeat(
                ShareHeartbeatParams(
                    group_id=req.group_id,
                    member_id=req.member_id,
                    member_epoch=int(req.member_epoch),
                    rack_id=req.rack_id,
                    topic_names=None if names is None else tuple(names),
                    client_id=ctx.client_id,
                    client_host=f"/{ctx.peer_host}",  # Kafka's InetAddress.toString()
                )
            )
        return heartbeat_response(resp_cls, result, result.error == ErrorCode.none)

    async def handle_describe(self, ctx: RequestContext, req: Any) -> Any:
        resp_cls = REGISTRY.spec(SHARE_GROUP_DESCRIBE).response_type(VERSION)
        mod = __import__(resp_cls.__module__, fromlist=["DescribedGroup"])
        groups = []
        for group_id in req.group_ids:
            if self._denied(ctx, AclOperation.DESCRIBE, group_id):
                found = DescribedShareGroup(group_id, ErrorCode.group_authorization_failed)
            else:
                found = await self.coordinator.share_group_describe(group_id)
            groups.append(self._group(mod, found))
        return resp_cls(throttle_time=NO_THROTTLE, groups=tuple(groups))

    @staticmethod
    def _group(mod: Any, g: DescribedShareGroup) -> Any:
        members = tuple(
            mod.Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=i32(m.member_epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(m.topic_names),
                assignment=mod.Assignment(
                    topic_partitions=tuple(
                        mod.TopicPartitions(
                            topic_id=t, topic_name=name, partitions=tuple(i32(p) for p in ps)
                        )
                        for t, name, ps in m.assignment
                    )
                ),
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
