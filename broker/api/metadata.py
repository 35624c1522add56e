"""Metadata v0-v13: brokers, cluster id, controller, topics with partitions, leaders and topic ids.

``topics`` null means every topic; an empty list (v1+) means none. Unknown topics are auto-created
when both the request and ``auto.create.topics.enable`` allow it (and answered in the same
response, since our controller commits before returning).

With an authorizer (as Kafka): listing every topic leaves out those the principal may not
DESCRIBE; a named one it may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether or not it exists
(by id: without its name); auto-creation needs CREATE on the cluster or the topic. Authorized
operations are reported when asked for (all of a resource's operations without an authorizer).
"""

import random
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.encoders.metadata import encode_metadata_response
from protocol.registry import REGISTRY

from ..controller.controller import TopicSpec
from ..controller.topics import topic_name_error
from ..metadata.image import METADATA_TOPIC, MetadataImage, TopicImage
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from .authz import allowed, allowed_on_cluster, operations_bits
from .context import RequestContext
from .dispatcher import Api
from .services import Services

API_KEY = 3
VERSIONS = (0, 13)
_UNSET_OPS = -(2**31)


def broker_rows(s: Services, img: MetadataImage, listener: str) -> list[dict[str, Any]]:
    """The unfenced brokers with an endpoint on ``listener``. Never none while this node
    answers: a node fenced at the end of its controlled shutdown (or not yet unfenced) that is
    the only broker lists itself, since a client given an empty list forgets every broker it
    knows (librdkafka decommissions them) and stalls until it re-bootstraps, minutes later."""
    rows = []
    for b in sorted(img.brokers.values(), key=lambda b: b.broker_id):
        ep = b.endpoint(listener)
        if ep is None or b.fenced:
            continue
        rows.append({"node_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack})
    me = img.brokers.get(s.node_id)
    ep = me.endpoint(listener) if me is not None else None
    if not rows and me is not None and ep is not None:
        rows.append({"node_id": me.broker_id, "host": ep.host, "port": ep.port, "rack": me.rack})
    return rows


def controller_for_clients(rows: list[dict[str, Any]], node_id: int) -> int:
    """The ``controller_id`` a Metadata or DescribeCluster answer gives clients (they cannot
    reach a KRaft controller; any broker forwards their admin requests): the answering node,
    alive since it answers, while it is listed; else a random listed broker; -1: none.
    Kafka's KRaft brokers name a random alive broker, but "alive" there is "not yet fenced":
    a killed node stays listed for a session, and librdkafka's admin client sends CreateTopics
    to it and fails with _DESTROY_BROKER once the next refresh drops it, with no retry."""
    if any(r["node_id"] == node_id for r in rows):
        return node_id
    return random.choice(rows)["node_id"] if rows else -1


def topic_row(t: TopicImage) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": t.name,
        "topic_id": t.topic_id,
        "is_internal": t.is_internal,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": p.replicas,
                "isr_nodes": p.isr,
                "offline_replicas": (),
            }
            for _, p in sorted(t.partitions.items())
        ],
        "topic_authorized_operations": _UNSET_OPS,
    }


class MetadataApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(3, self.handle, max_version=13, encoder=encode_metadata_response),
        ]

    async def handle(self, ctx: RequestContext, req: Any) -> Any:
        s = self.s
        img = s.image()
        version = ctx.api_version
        topics: list[dict[str, Any]] = []
        authz = s.authorizer
        if version < 12 and req.topics and _needs_v12(req.topics):
            return _invalid_request(version, req.topics)
        if req.topics is None or (version == 0 and not req.topics):
            topics = [
                topic_row(t)
                for n, t in sorted(img.topics.items())
                if n != METADATA_TOPIC
                and (
                    authz is None
                    or allowed(authz, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, n)
                )
            ]
        else:
            to_create: list[str] = []
            for rt in req.topics:
                name = getattr(rt, "name", None)
                topic_id = getattr(rt, "topic_id", None)
                t = (
                    img.topics.get(name)
                    if name
                    else (img.topic_by_id(topic_id) if topic_id else None)
                )
                shown = name or (t.name if t is not None else None)
                if (
                    authz is not None
                    and shown
                    and not allowed(authz, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, shown)
                ):
                    topics.append(
                        {
                            "error_code": ErrorCode.topic_authorization_failed,
                            "name": name,
                            "topic_id": topic_id,
                            "partitions": (),
                        }
                    )
                    continue
                if t is not None:
                    topics.append(topic_row(t))
                    continue
                if name and topic_name_error(name):
                    topics.append(
                        {
                            "error_code": ErrorCode.invalid_topic_exception,
                            "name": name,
                            "topic_id": None,
                            "partitions": (),
                        }
                    )
                    continue
                allow = getattr(req, "allow_auto_topic_creation", True)
                if name and allow and s.auto_create_topics:
                    if authz is not None and not (
                        allowed_on_cluster(authz, ctx, AclOperation.CREATE)
                        or allowed(authz, ctx, AclOperation.CREATE, ResourceType.TOPIC, name)
                    ):
                        topics.append(
                            {
                                "error_code": ErrorCode.topic_authorization_failed,
                                "name": name,
                                "partitions": (),
                            }
                        )
                        continue
                    to_create.append(name)
                    continue
                code = (
                    ErrorCode.unknown_topic_id
                    if name is None
                    else ErrorCode.unknown_topic_or_partition
                )
                topics.append(
                    {"error_code": code, "name": name, "topic_id": topic_id, "partitions": ()}
                )
            if to_create:
                results = await s.controller.create_topics([TopicSpec(n) for n in to_create], False)
                for r in results:
                    if r.error in (ErrorCode.none, ErrorCode.topic_already_exists):
                        # Kafka's answer for a topic this request created, or one another
                        # created meanwhile: LEADER_NOT_AVAILABLE, so the client asks again
                        # (this node may not have applied it yet: an empty partition list with
                        # no error would tell the client the topic has no partitions)
                        topics.append(
                            {
                                "error_code": ErrorCode.leader_not_available,
                                "name": r.name,
                                "partitions": (),
                            }
                        )
                    else:
                        topics.append({"error_code": r.error, "name": r.name, "partitions": ()})
        if getattr(req, "include_topic_authorized_operations", False):
            for row in topics:
                if row["error_code"] == ErrorCode.none:
                    row["topic_authorized_operations"] = operations_bits(
                        authz, ctx, ResourceType.TOPIC, row["name"]
                    )
        cluster_ops = _UNSET_OPS
        if getattr(req, "include_cluster_authorized_operations", False):
            cluster_ops = operations_bits(authz, ctx, ResourceType.CLUSTER, CLUSTER_NAME)
        cls = REGISTRY.spec(API_KEY).response_type(version)
        brokers = broker_rows(s, img, ctx.listener)
        return build(
            cls,
            {
                "throttle_time": 0,
                "brokers": brokers,
                "cluster_id": s.cluster_id,
                "controller_id": controller_for_clients(brokers, s.node_id),
                "topics": topics,
                "cluster_authorized_operations": cluster_ops,
            },
        )


def _needs_v12(topics: Any) -> bool:
    """A topic asked for by id, or with no name: not before v12 (where the name turns
    nullable); Kafka refuses such a request as invalid."""
    for t in topics:
        topic_id = getattr(t, "topic_id", None)
        if t.name is None or (topic_id is not None and topic_id.int != 0):
            return True
    return False


def _invalid_request(version: int, topics: Any) -> Any:
    """Kafka's error answer to an invalid Metadata request: every topic asked for with
    INVALID_REQUEST, a missing name as "" (these versions have no null name)."""
    cls = REGISTRY.spec(API_KEY).response_type(version)
    rows = [
        {
            "error_code": ErrorCode.invalid_request,
            "name": t.name or "",
            "topic_id": getattr(t, "topic_id", None),
            "partitions": (),
        }
        for t in topics
    ]
    return build(cls, {"throttle_time": 0, "controller_id": -1, "topics": rows})
