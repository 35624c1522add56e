"""DescribeShareGroupOffsets v0 (KIP-932, Kafka 4.1's version), on the group's coordinator:
each share-partition's start offset, read from the share coordinator (`__share_group_state`,
this node or another), with the partition's current leader epoch.

Topics null means the share-partitions the group has initialized state for (record 15, so also
when it has no members, as Kafka 4.1), and the topics its members subscribe to (whole, for a
group written before record 15 was). A partition without stored state
has start offset -1, as in Kafka; one whose state cannot be read carries the share
coordinator's error. A group id that is no share group: GROUP_ID_NOT_FOUND (NOT_COORDINATOR on
a node not coordinating it). With an authorizer (as Kafka): DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED), topics without DESCRIBE are left out.
"""

import asyncio
import datetime
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta, i64

from protocol.registry import REGISTRY

from ..coordinator.group import GroupCoordinator
from ..coordinator.runtime import CoordinatorError
from ..coordinator.share.persister import SharePersister
from ..coordinator.share.state_records import ShareKey
from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

DESCRIBE_SHARE_GROUP_OFFSETS = 90
# How long an admin read waits for a share coordinator that is moving or loading before the
# partition is answered with the error (a share leader's own read waits longer)
ADMIN_READ_RETRY_MS: Final = 2_000

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


class ShareOffsetsApi:
    def __init__(
        self, services: Services, groups: GroupCoordinator, persister: SharePersister
    ) -> None:
        self.s = services
        self.groups = groups
        self.persister = persister

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [Api(DESCRIBE_SHARE_GROUP_OFFSETS, self.handle_describe, max_version=0)]

    async def handle_describe(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(DESCRIBE_SHARE_GROUP_OFFSETS).response_type(0)
        mod = __import__(cls.__module__, fromlist=["DescribeShareGroupOffsetsResponseGroup"])
        groups = [await self._group(ctx, mod, g) for g in req.groups]
        return cls(throttle_time=_NO_THROTTLE, groups=tuple(groups))

    async def _group(self, ctx: RequestContext, mod: Any, g: Any) -> Any:
        def failed(code: ErrorCode, message: str | None = None) -> Any:
            return mod.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=(), error_code=code, error_message=message
            )

        authz = self.s.authorizer
        if not allowed(authz, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            return failed(ErrorCode.group_authorization_failed)
        error, subscribed = await self.groups.share_group_topics(g.group_id)
        if error != ErrorCode.none:
            return failed(error, f"Group {g.group_id} is not a share group.")
        img = self.s.image()
        wanted: list[tuple[str, list[int] | None]]
        if g.topics is None:
            error, initialized = await self.groups.share_group_initialized(g.group_id)
            if error != ErrorCode.none:
                return failed(error, f"Group {g.group_id} is not a share group.")
            names = {t.topic_id: name for name, t in img.topics.items()}
            known = {names[t]: sorted(tp.partitions) for t, tp in initialized.items() if t in names}
            wanted = [
                (n, None if n in subscribed else known[n]) for n in sorted({*known, *subscribed})
            ]
        else:
            wanted = [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
        topics = []
        for name, partitions in wanted:
            if not allowed(authz, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                continue
            topic = img.topics.get(name)
            if topic is None:
                continue  # deleted meanwhile, or never there: nothing to say
            # all partitions at once: each may wait for a coordinator that is moving
            asked = sorted(topic.partitions) if partitions is None else partitions
            rows = await asyncio.gather(
                *(self._partition(mod, g.group_id, topic, p) for p in asked)
            )
            topics.append(
                mod.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=topic.topic_id, partitions=tuple(rows)
                )
            )
        return mod.DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, topics=tuple(topics), error_code=ErrorCode.none
        )

    async def _partition(self, mod: Any, group_id: str, topic: Any, partition: int) -> Any:
        start, epoch, error = -1, -1, ErrorCode.none
        if partition not in topic.partitions:
            error = ErrorCode.unknown_topic_or_partition
        else:
            try:
                found = await self.persister.read(
                    ShareKey(group_id, topic.topic_id, partition), ADMIN_READ_RETRY_MS
                )
            except CoordinatorError as exc:
                error = exc.code
            else:
                if found is not None:
                    start = found.start_offset
                    epoch = topic.partitions[partition].leader_epoch
        return mod.DescribeShareGroupOffsetsResponsePartition(
            partition_index=i32(partition),
            start_offset=i64(start),
            leader_epoch=i32(epoch),
            error_code=error,
        )
