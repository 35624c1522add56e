"""DeleteRecords v0-v2 (DescribeLogDirs and AlterReplicaLogDirs: ``log_dirs``).

With an authorizer: DeleteRecords needs DELETE on the topic (TOPIC_AUTHORIZATION_FAILED).
"""

from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

DELETE_RECORDS = 21


class LogAdminApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(21, self.delete_records, max_version=2),
        ]

    async def delete_records(self, ctx: RequestContext, req: Any) -> Any:
        topics = []
        authz = self.s.authorizer
        for t in req.topics:
            parts = []
            denied = authz is not None and not allowed(
                authz, ctx, AclOperation.DELETE, ResourceType.TOPIC, t.name
            )
            for p in t.partitions:
                row: dict[str, Any] = {
                    "partition_index": p.partition_index,
                    "low_watermark": -1,
                    "error_code": ErrorCode.none,
                }
                parts.append(row)
                if denied:
                    row["error_code"] = ErrorCode.topic_authorization_failed
                    continue
                hosted = self.s.replicas.get(t.name, p.partition_index)
                if hosted is None:
                    row["error_code"] = self.s.not_hosted_error(t.name, p.partition_index)
                    continue
                if not self.s.writable(t.name, p.partition_index):
                    row["error_code"] = MirrorErrorCode.READ_ONLY_TOPIC
                    continue
                plog = hosted.log
                offset = plog.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > plog.high_watermark:
                    row["error_code"] = ErrorCode.offset_out_of_range
                    continue
                try:
                    # through the partition, which wakes Fetches waiting on the log start
                    row["low_watermark"] = hosted.delete_records_before(offset)
                except Exception as e:
                    row["error_code"] = getattr(e, "error_code", ErrorCode.offset_out_of_range)
            topics.append({"name": t.name, "partitions": parts})
        cls = REGISTRY.spec(DELETE_RECORDS).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "topics": topics})
