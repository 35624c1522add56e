"""AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0 (KIP-932, Kafka 4.1's versions), on
the group's coordinator: set or drop share-partition start offsets (SPSO) of a share group.

Only while the group has no members (NON_EMPTY_GROUP); a group id held by a classic or consumer
group is GROUP_ID_NOT_FOUND. Alter makes a group that does not exist yet (empty), as Kafka, so
that a mirror can carry a share group's progress to a cluster it never ran on (KIP-1279);
delete of an unknown group is GROUP_ID_NOT_FOUND. Alter writes a new state epoch at the given
start offset, nothing in flight, to the share coordinator (InitializeShareGroupState); delete
removes the state (DeleteShareGroupState) of every partition of each topic. A partition leader
holding the old state drops it on the next new share session (and its own next write is fenced
by the new state epoch), so consumers start from the altered offset, or from
`share.auto.offset.reset` after a delete.

Errors as Kafka: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (per partition for
alter, per topic for delete), a negative start offset INVALID_REQUEST, an empty group id
INVALID_GROUP_ID. With an authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED) and READ on
each topic (TOPIC_AUTHORIZATION_FAILED).
"""

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from protocol.registry import REGISTRY

from ..coordinator.share.offsets_admin import ShareOffsetsAdmin
from ..coordinator.share.state_records import ShareKey
from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 91, 92

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_NO_TOPIC_ID = uuid.UUID(int=0)


class ShareOffsetChangesApi:
    def __init__(self, services: Services, admin: ShareOffsetsAdmin) -> None:
        self.s = services
        self.admin = admin

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(ALTER_SHARE_GROUP_OFFSETS, self.handle_alter, max_version=0),
            Api(DELETE_SHARE_GROUP_OFFSETS, self.handle_delete, max_version=0),
        ]

    def _group_error(self, ctx: RequestContext, group_id: str) -> ErrorCode | None:
        if not group_id:
            return ErrorCode.invalid_group_id
        authz = self.s.authorizer
        if not allowed(authz, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
            return ErrorCode.group_authorization_failed
        return None

    def _topic_readable(self, ctx: RequestContext, name: str) -> bool:
        return allowed(self.s.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, name)

    # -- AlterShareGroupOffsets ------------------------------------------------------------------

    async def handle_alter(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(ALTER_SHARE_GROUP_OFFSETS).response_type(0)
        mod = __import__(cls.__module__, fromlist=["AlterShareGroupOffsetsResponseTopic"])
        img = self.s.image()

        def answer(
            rows: dict[str, list[tuple[int, ErrorCode, str | None]]],
            error: ErrorCode = ErrorCode.none,
            message: str | None = None,
        ) -> Any:
            topics = []
            for name, parts in rows.items():
                topic = img.topics.get(name)
                topics.append(
                    mod.AlterShareGroupOffsetsResponseTopic(
                        topic_name=name,
                        topic_id=topic.topic_id if topic is not None else _NO_TOPIC_ID,
                        partitions=tuple(
                            mod.AlterShareGroupOffsetsResponsePartition(
                                partition_index=i32(p), error_code=code, error_message=msg
                            )
                            for p, code, msg in parts
                        ),
                    )
                )
            return cls(
                throttle_time=_NO_THROTTLE,
                error_code=error,
                error_message=message,
                responses=tuple(topics),
            )

        def everywhere(code: ErrorCode, message: str | None = None) -> Any:
            """The whole request failed: the code on every partition too (as Kafka)."""
            rows = {
                t.topic_name: [(int(p.partition_index), code, message) for p in t.partitions]
                for t in req.topics
            }
            return answer(rows, code, message)

        error = self._group_error(ctx, req.group_id)
        if error is not None:
            return everywhere(error)
        rows: dict[str, list[tuple[int, ErrorCode, str | None]]] = {}
        valid: dict[ShareKey, int] = {}  # -> start offset
        names: dict[uuid.UUID, str] = {}
        for t in req.topics:
            topic = img.topics.get(t.topic_name)
            out = rows.setdefault(t.topic_name, [])
            for p in t.partitions:
                index, start = int(p.partition_index), int(p.start_offset)
                if not self._topic_readable(ctx, t.topic_name):
                    out.append((index, ErrorCode.topic_authorization_failed, None))
                elif topic is None or index not in topic.partitions:
                    msg = f"The topic-partition {t.topic_name}-{index} does not exist."
                    out.append((index, ErrorCode.unknown_topic_or_partition, msg))
                elif start < 0:
                    msg = f"The start offset {start} is negative."
                    out.append((index, ErrorCode.invalid_request, msg))
                else:
                    valid[ShareKey(req.group_id, topic.topic_id, index)] = start
                    names[topic.topic_id] = t.topic_name
        (error, message), done = await self.admin.alter(req.group_id, valid, names)
        if error != ErrorCode.none:
            return everywhere(error, message)
        for key, outcome in done.items():
            rows[names[key.topic_id]].append((key.partition, *outcome))
        return answer(rows)

    # -- DeleteShareGroupOffsets -----------------------------------------------------------------

    async def handle_delete(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(DELETE_SHARE_GROUP_OFFSETS).response_type(0)
        mod = __import__(cls.__module__, fromlist=["DeleteShareGroupOffsetsResponseTopic"])
        img = self.s.image()

        def row(name: str, code: ErrorCode, message: str | None = None) -> Any:
            topic = img.topics.get(name)
            return mod.DeleteShareGroupOffsetsResponseTopic(
                topic_name=name,
                topic_id=topic.topic_id if topic is not None else _NO_TOPIC_ID,
                error_code=code,
                error_message=message,
            )

        def failed(code: ErrorCode, message: str | None = None) -> Any:
            return cls(
                throttle_time=_NO_THROTTLE,
                error_code=code,
                error_message=message,
                responses=tuple(row(t.topic_name, code, message) for t in req.topics),
            )

        error = self._group_error(ctx, req.group_id)
        if error is not None:
            return failed(error)
        keys: list[ShareKey] = []
        names: dict[uuid.UUID, str] = {}
        outcome: dict[str, tuple[ErrorCode, str | None] | None] = {}
        for t in req.topics:
            topic = img.topics.get(t.topic_name)
            if not self._topic_readable(ctx, t.topic_name):
                outcome[t.topic_name] = (ErrorCode.topic_authorization_failed, None)
            elif topic is None:
                msg = f"The topic {t.topic_name} does not exist."
                outcome[t.topic_name] = (ErrorCode.unknown_topic_or_partition, msg)
            else:
                outcome[t.topic_name] = None
                names[topic.topic_id] = t.topic_name
                keys += [
                    ShareKey(req.group_id, topic.topic_id, p) for p in sorted(topic.partitions)
                ]
        (error, message), done = await self.admin.delete(req.group_id, keys, names)
        if error != ErrorCode.none:
            return failed(error, message)
        out = []
        for t in req.topics:
            found = outcome[t.topic_name]
            if found is None:  # the topic's first failed partition, if any
                topic_id = img.topics[t.topic_name].topic_id
                codes = [r for k, r in done.items() if k.topic_id == topic_id]
                found = next((r for r in codes if r[0] != ErrorCode.none), (ErrorCode.none, None))
            out.append(row(t.topic_name, *found))
        return cls(throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, responses=tuple(out))
