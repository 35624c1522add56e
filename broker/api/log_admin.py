"""DeleteRecords v0-v2 and DescribeLogDirs v1-v4.

With an authorizer: DeleteRecords needs DELETE on the topic (TOPIC_AUTHORIZATION_FAILED);
DescribeLogDirs DESCRIBE on the cluster (otherwise no directories, CLUSTER_AUTHORIZATION_FAILED).
"""

import shutil
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from ..security.acls import AclOperation, ResourceType
from .authz import allowed, allowed_on_cluster
from .context import RequestContext
from .services import Services

DELETE_RECORDS, DESCRIBE_LOG_DIRS = 21, 35


class LogAdminApi:
    def __init__(self, services: Services) -> None:
        self.s = services

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
                    row["error_code"] = ErrorCode.unknown_topic_or_partition
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
                    row["low_watermark"] = plog.delete_records_before(offset)
                except Exception as e:
                    row["error_code"] = getattr(e, "error_code", ErrorCode.offset_out_of_range)
            topics.append({"name": t.name, "partitions": parts})
        cls = REGISTRY.spec(DELETE_RECORDS).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "topics": topics})

    async def describe_log_dirs(self, ctx: RequestContext, req: Any) -> Any:
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.DESCRIBE):
            cls = REGISTRY.spec(DESCRIBE_LOG_DIRS).response_type(ctx.api_version)
            return build(
                cls,
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "results": [],
                },
            )
        wanted: dict[str, set[int]] | None = None
        if req.topics is not None:
            wanted = {t.topic: set(t.partitions) for t in req.topics}
        by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {
            str(d): {} for d in self.s.log_manager.log_dirs
        }
        for (topic, partition), hosted in self.s.replicas.partitions().items():
            if wanted is not None and partition not in wanted.get(topic, ()):
                continue
            d = str(hosted.log.dir.parent)
            by_dir.setdefault(d, {}).setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "partition_size": hosted.log.size_bytes,
                    "offset_lag": 0,
                    "is_future_key": False,
                }
            )
        results = []
        for d, topics in by_dir.items():
            try:
                usage = shutil.disk_usage(d)
                total, free = usage.total, usage.free
            except OSError:
                total = free = -1
            results.append(
                {
                    "error_code": ErrorCode.none,
                    "log_dir": d,
                    "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                    "total_bytes": total,
                    "usable_bytes": free,
                }
            )
        cls = REGISTRY.spec(DESCRIBE_LOG_DIRS).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "results": results})
