"""CreateTopics v2-v7, DeleteTopics v1-v6, CreatePartitions v0-v3: admin requests the controller
turns into metadata records. Responses are sent once the records are committed, so a client that
creates a topic can use it straight away.

With an authorizer: creating needs CREATE on the cluster or the topic, deleting DELETE on the
topic (a topic named by id the principal may not DESCRIBE is answered without its name), adding
partitions ALTER on the topic; otherwise TOPIC_AUTHORIZATION_FAILED for that topic. CreateTopics
returns a new topic's configs only with DESCRIBE_CONFIGS on it.

``controller_mutation_rate`` client quotas (KIP-599) count the partitions each request creates or
deletes (``client_throttle.MutationQuota``): from CreateTopics v6, DeleteTopics v5 and
CreatePartitions v3 a topic is refused with THROTTLING_QUOTA_EXCEEDED while the client is over
its quota; every version gets the throttle time in its response.
"""

from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.controller import TopicResult, TopicSpec
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, allowed_on_cluster
from .client_throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, ClientThrottle, MutationQuota
from .context import RequestContext
from .dispatcher import Api
from .services import Services

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
_DENIED = "Authorization failed."


def _merge(
    names: list[str],
    denied: set[str],
    results: list[TopicResult],
    throttled: frozenset[str] | set[str] = frozenset(),
) -> list[TopicResult]:
    """The controller's results for the allowed names, denials and topics refused by a
    controller_mutation_rate quota in the request's order."""
    done = iter(results)
    return [
        TopicResult(n, ErrorCode.topic_authorization_failed, _DENIED)
        if n in denied
        else TopicResult(n, ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        if n in throttled
        else next(done)
        for n in names
    ]


def _admit(mq: MutationQuota | None, items: list[tuple[str, int]], skip: set[str]) -> set[str]:
    """The names a mutation quota refuses (``items``: name and partitions it mutates)."""
    if mq is None:
        return set()
    return {name for name, permits in items if name not in skip and not mq.admit(permits)}


class TopicsApi:
    def __init__(self, services: Services, quotas: ClientThrottle | None = None) -> None:
        self.s = services
        self.quotas = quotas  # controller_mutation_rate; None: not enforced

    def _mutation_quota(self, ctx: RequestContext, strict_from: int) -> MutationQuota | None:
        q = self.quotas
        return None if q is None else q.mutation_quota(ctx, ctx.api_version >= strict_from)

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(19, self.create_topics, min_version=2, max_version=8),
            Api(20, self.delete_topics, min_version=1, max_version=6),
            Api(37, self.create_partitions, max_version=3),
        ]

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
        authz = self.s.authorizer
        denied: set[str] = set()
        if authz is not None and not allowed_on_cluster(authz, ctx, AclOperation.CREATE):
            denied = {
                sp.name
                for sp in specs
                if not allowed(authz, ctx, AclOperation.CREATE, ResourceType.TOPIC, sp.name)
            }
        mq = None if req.validate_only else self._mutation_quota(ctx, 6)
        default_n = self.s.config.num_partitions if self.s.config is not None else 1
        throttled = _admit(
            mq,
            [
                (sp.name, len(sp.assignments) if sp.assignments else sp.num_partitions)
                if sp.assignments or sp.num_partitions > 0
                else (sp.name, default_n)
                for sp in specs
            ],
            denied,
        )
        results = await self.s.controller.create_topics(
            [sp for sp in specs if sp.name not in denied and sp.name not in throttled],
            req.validate_only,
        )
        if denied or throttled:
            results = _merge([sp.name for sp in specs], denied, results, throttled)
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
            if r.error == ErrorCode.none and not allowed(
                authz, ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, r.name
            ):
                row["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            elif r.error == ErrorCode.none:
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
        throttle_ms = mq.throttle_ms(ctx) if mq is not None else 0
        return build(cls, {"throttle_time": throttle_ms, "topics": rows})

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
        authz = self.s.authorizer
        if authz is not None:
            names = self._deletable(ctx, names, pending, req)
        mq = self._mutation_quota(ctx, 5)
        throttled = _admit(
            mq, [(n, len(t.partitions) if (t := img.topics.get(n)) else 0) for n in names], set()
        )
        for name in throttled:
            pending[name]["error_code"] = ErrorCode.throttling_quota_exceeded
            pending[name]["error_message"] = THROTTLING_QUOTA_EXCEEDED_MESSAGE
        names = [n for n in names if n not in throttled]
        # nothing left to delete (all refused, say): no controller call, which a controller
        # that is not the active one could only answer NOT_CONTROLLER (Kafka's returns early too)
        for r in await self.s.controller.delete_topics(names) if names else ():
            row = pending[r.name]
            row["error_code"], row["error_message"] = r.error, r.message
            if r.topic_id is not None:
                row["topic_id"] = r.topic_id
        cls = REGISTRY.spec(DELETE_TOPICS).response_type(ctx.api_version)
        throttle_ms = mq.throttle_ms(ctx) if mq is not None else 0
        return build(cls, {"throttle_time": throttle_ms, "responses": rows})

    def _deletable(
        self, ctx: RequestContext, names: list[str], pending: dict[str, dict[str, Any]], req: Any
    ) -> list[str]:
        """The names the principal may delete; the others' rows get the authorization error."""
        authz = self.s.authorizer
        named = {t.name for t in getattr(req, "topics", None) or () if t.name is not None}
        named |= set(getattr(req, "topic_names", None) or ())
        out = []
        for name in names:
            if allowed(authz, ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
                out.append(name)
                continue
            row = pending[name]
            row["error_code"] = ErrorCode.topic_authorization_failed
            row["error_message"] = _DENIED
            if name not in named and not allowed(
                authz, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name
            ):
                row["name"] = None  # asked for by id: the name is not disclosed
        return out

    async def create_partitions(self, ctx: RequestContext, req: Any) -> Any:
        reqs = [
            (
                t.name,
                t.count,
                [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None,
            )
            for t in req.topics
        ]
        authz = self.s.authorizer
        denied: set[str] = set()
        if authz is not None:
            denied = {
                name
                for name, _n, _a in reqs
                if not allowed(authz, ctx, AclOperation.ALTER, ResourceType.TOPIC, name)
            }
        mq = None if req.validate_only else self._mutation_quota(ctx, 3)
        img = self.s.image()
        throttled = _admit(
            mq,
            [
                (name, max(0, count - (len(t.partitions) if (t := img.topics.get(name)) else 0)))
                for name, count, _a in reqs
            ],
            denied,
        )
        asked = [r for r in reqs if r[0] not in denied and r[0] not in throttled]
        results = (
            await self.s.controller.create_partitions(asked, req.validate_only) if asked else []
        )
        if denied or throttled:
            results = _merge([r[0] for r in reqs], denied, results, throttled)
        rows = [
            {"name": r.name, "error_code": r.error, "error_message": r.message} for r in results
        ]
        cls = REGISTRY.spec(CREATE_PARTITIONS).response_type(ctx.api_version)
        throttle_ms = mq.throttle_ms(ctx) if mq is not None else 0
        return build(cls, {"throttle_time": throttle_ms, "results": rows})
