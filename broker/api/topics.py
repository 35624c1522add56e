"""CreateTopics v2-v7, DeleteTopics v1-v6, CreatePartitions v0-v3: admin requests the controller
turns into metadata records. Responses are sent once the records are committed, so a client that
creates a topic can use it straight away.
"""

from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.controller import TopicSpec
from .context import RequestContext
from .services import Services

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


class TopicsApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    async def create_topics(self, ctx: RequestContext, req: Any) -> Any:
        specs = []
        for t in req.topics:
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            mirror = getattr(t, "mirror_info", None)
            specs.append(
                TopicSpec(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=assignments,
                    configs={c.name: c.value for c in t.configs},
                    topic_id=mirror.topic_id if mirror is not None else None,
                )
            )
        results = await self.s.controller.create_topics(specs, req.validate_only)
        rows = []
        for r in results:
            row: dict[str, Any] = {
                "name": r.name,
                "topic_id": r.topic_id,
                "error_code": r.error,
                "error_message": r.message,
                "num_partitions": r.num_partitions,
                "replication_factor": r.replication_factor,
                "configs": None,
            }
            if r.error == ErrorCode.none:
                row["configs"] = [
                    {
                        "name": c["name"],
                        "value": c["value"],
                        "read_only": c["read_only"],
                        "config_source": c["source"],
                        "is_sensitive": c["sensitive"],
                    }
                    for c in self.s.describe_topic_configs(r.name)
                ]
            rows.append(row)
        cls = REGISTRY.spec(CREATE_TOPICS).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "topics": rows})

    async def delete_topics(self, ctx: RequestContext, req: Any) -> Any:
        img = self.s.image()
        names: list[str] = []
        rows: list[dict[str, Any]] = []
        pending: dict[str, dict[str, Any]] = {}
        if getattr(req, "topics", None) is not None:
            for t in req.topics:
                if t.name is None:
                    topic = img.topic_by_id(t.topic_id) if t.topic_id else None
                    if topic is None:
                        rows.append(
                            {
                                "name": None,
                                "topic_id": t.topic_id,
                                "error_code": ErrorCode.unknown_topic_id,
                                "error_message": "This server does not host this topic ID.",
                            }
                        )
                        continue
                    name = topic.name
                else:
                    name = t.name
                row = {
                    "name": name,
                    "topic_id": t.topic_id,
                    "error_code": ErrorCode.none,
                    "error_message": None,
                }
                rows.append(row)
                pending[name] = row
                names.append(name)
        else:
            for name in req.topic_names:
                row = {
                    "name": name,
                    "topic_id": None,
                    "error_code": ErrorCode.none,
                    "error_message": None,
                }
                rows.append(row)
                pending[name] = row
                names.append(name)
        for r in await self.s.controller.delete_topics(names):
            row = pending[r.name]
            row["error_code"], row["error_message"] = r.error, r.message
            if r.topic_id is not None:
                row["topic_id"] = r.topic_id
        cls = REGISTRY.spec(DELETE_TOPICS).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "responses": rows})

    async def create_partitions(self, ctx: RequestContext, req: Any) -> Any:
        reqs = [
            (
                t.name,
                t.count,
                [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None,
            )
            for t in req.topics
        ]
        results = await self.s.controller.create_partitions(reqs, req.validate_only)
        rows = [
            {"name": r.name, "error_code": r.error, "error_message": r.message} for r in results
        ]
        cls = REGISTRY.spec(CREATE_PARTITIONS).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "results": rows})
