"""DescribeCluster v0-v2 (endpoint type 2, the controllers, on a controller listener: KIP-919),
FindCoordinator v0-v6.

Group coordinators live on this node's ``__consumer_offsets`` partitions (created on first use,
as Kafka does). Transaction coordinators (key type 1) live on its ``__transaction_state``
partitions, created on first lookup from ``transaction.state.log.num.partitions`` /
``transaction.state.log.replication.factor``; when it cannot be created the lookup gets
COORDINATOR_NOT_AVAILABLE, as in Kafka. InitProducerId is served with the transaction RPCs
(`txn.py`). Mirror coordinators (key type 3, KIP-1279) live on this node's ``__mirror_state``
partitions, created on first lookup from ``mirror.topic.num.partitions`` /
``mirror.topic.replication.factor``; when it cannot be created (e.g. a replication factor above
the live brokers) the lookup gets COORDINATOR_NOT_AVAILABLE, as in Kafka. Share coordinators
(key type 2, KIP-932, key ``<group>:<topic id>:<partition>``) live on its ``__share_group_state``
partitions, created on first use from ``share.coordinator.state.topic.num.partitions`` /
``share.coordinator.state.topic.replication.factor``.
"""

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.controller import TopicSpec
from ..coordinator.runtime import partition_for
from ..coordinator.share.state_coordinator import SHARE_STATE_TOPIC
from ..coordinator.txn.config import TRANSACTION_STATE_TOPIC
from ..metadata.mirror_states import MIRROR_STATE_TOPIC
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, cluster_allowed
from .context import RequestContext
from .dispatcher import Api
from .metadata import broker_rows, controller_for_clients
from .services import Services

DESCRIBE_CLUSTER, FIND_COORDINATOR = 60, 10
GROUP_KEY, TXN_KEY, SHARE_KEY, MIRROR_KEY = 0, 1, 2, 3
BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2  # DescribeCluster v1+ EndpointType (KIP-919)
OFFSETS_TOPIC = "__consumer_offsets"


class ClusterApi:
    def __init__(
        self,
        services: Services,
        offsets_partitions: int,
        offsets_rf: int,
        share_enabled: Callable[[], bool] | None = None,
    ) -> None:
        self.s = services
        self._offsets_partitions = offsets_partitions
        self._offsets_rf = offsets_rf
        # KIP-932: share coordinators are found while share groups are on (the node's
        # group.share.enable or share.version 1: api_handlers.share_groups_enabled)
        self.share_enabled: Callable[[], bool] = share_enabled or (
            lambda: bool(getattr(services.config, "group_share_enable", False))
        )

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(FIND_COORDINATOR, self.find_coordinator, max_version=6),
            Api(DESCRIBE_CLUSTER, self.describe_cluster, max_version=2),
        ]

    async def describe_cluster(self, ctx: RequestContext, req: Any) -> Any:
        endpoint_type = getattr(req, "endpoint_type", BROKER_ENDPOINTS)
        on_controller_listener = ctx.listener in self.s.controller_listeners
        error, message = ErrorCode.none, None
        brokers: list[dict[str, Any]] = []
        # Clients see this broker as "the controller" (`controller_for_clients`: they cannot
        # reach a KRaft controller; any broker forwards); tools asking for controller endpoints
        # (KIP-919) get the voters and the active controller.
        controller_id = -1
        if endpoint_type == CONTROLLER_ENDPOINTS and on_controller_listener:
            brokers = [
                {"broker_id": n, "host": h, "port": p, "rack": None, "is_fenced": False}
                for n, h, p in self.s.controller_endpoints()
            ]
            controller_id = self.s.active_controller()
        elif endpoint_type == CONTROLLER_ENDPOINTS or (
            endpoint_type == BROKER_ENDPOINTS and on_controller_listener
        ):
            error = ErrorCode.unsupported_endpoint_type
            message = (
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                "of type CONTROLLER"
                if endpoint_type == CONTROLLER_ENDPOINTS
                else "The request was sent to an endpoint of type CONTROLLER, but we wanted an "
                "endpoint of type BROKER"
            )
        elif endpoint_type != BROKER_ENDPOINTS:
            error, message = (
                ErrorCode.unsupported_endpoint_type,
                f"Unknown endpoint type {endpoint_type}",
            )
        else:
            rows = broker_rows(self.s, self.s.image(), ctx.listener)
            brokers = [{**b, "broker_id": b["node_id"], "is_fenced": False} for b in rows]
            controller_id = controller_for_clients(rows, self.s.node_id)
        cls = REGISTRY.spec(DESCRIBE_CLUSTER).response_type(ctx.api_version)
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": error,
                "error_message": message,
                "endpoint_type": endpoint_type,
                "cluster_id": self.s.cluster_id,
                "controller_id": controller_id,
                "brokers": brokers,
                "cluster_authorized_operations": -(2**31),
            },
        )

    async def ensure_offsets_topic(self) -> None:
        if OFFSETS_TOPIC not in self.s.image().topics:
            await self.s.controller.create_topics(
                [
                    TopicSpec(
                        OFFSETS_TOPIC,
                        self._offsets_partitions,
                        self._offsets_rf,
                        configs={
                            "cleanup.policy": "compact",
                            "compression.type": "producer",
                            "segment.bytes": str(
                                getattr(self.s.config, "offsets_topic_segment_bytes", 104857600)
                            ),
                        },
                    )
                ],
                False,
            )

    async def ensure_mirror_state_topic(self) -> bool:
        """Create the compacted ``__mirror_state`` topic unless it exists; whether it exists."""
        if MIRROR_STATE_TOPIC in self.s.image().topics:
            return True
        cfg = self.s.config
        (result,) = await self.s.controller.create_topics(
            [
                TopicSpec(
                    MIRROR_STATE_TOPIC,
                    getattr(cfg, "mirror_topic_num_partitions", 50),
                    getattr(cfg, "mirror_topic_replication_factor", 3),
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": "104857600",
                    },
                )
            ],
            False,
        )
        # A concurrent lookup may have created it first.
        return MIRROR_STATE_TOPIC in self.s.image().topics or result.error == ErrorCode.none

    async def ensure_share_state_topic(self) -> bool:
        """Create the compacted ``__share_group_state`` topic unless it exists; whether it does."""
        if SHARE_STATE_TOPIC in self.s.image().topics:
            return True
        cfg = self.s.config
        (result,) = await self.s.controller.create_topics(
            [
                TopicSpec(
                    SHARE_STATE_TOPIC,
                    getattr(cfg, "share_coordinator_state_topic_num_partitions", 50),
                    getattr(cfg, "share_coordinator_state_topic_replication_factor", 3),
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": "104857600",
                        "min.insync.replicas": str(
                            getattr(cfg, "share_coordinator_state_topic_min_isr", 2)
                        ),
                    },
                )
            ],
            False,
        )
        # created by a concurrent lookup (maybe on another node, not in our image yet): fine
        return result.error in (ErrorCode.none, ErrorCode.topic_already_exists) or (
            SHARE_STATE_TOPIC in self.s.image().topics
        )

    async def ensure_transaction_state_topic(self) -> bool:
        """Create the compacted ``__transaction_state`` topic unless it exists; whether it does."""
        if TRANSACTION_STATE_TOPIC in self.s.image().topics:
            return True
        cfg = self.s.config
        (result,) = await self.s.controller.create_topics(
            [
                TopicSpec(
                    TRANSACTION_STATE_TOPIC,
                    getattr(cfg, "transaction_state_log_num_partitions", 50),
                    getattr(cfg, "transaction_state_log_replication_factor", 3),
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "uncompressed",
                        "segment.bytes": str(
                            getattr(cfg, "transaction_state_log_segment_bytes", 104857600)
                        ),
                        # Kafka's rule: transaction state is written with acks=all at this ISR
                        "min.insync.replicas": str(
                            getattr(cfg, "transaction_state_log_min_isr", 2)
                        ),
                    },
                )
            ],
            False,
        )
        return TRANSACTION_STATE_TOPIC in self.s.image().topics or result.error == ErrorCode.none

    def _coordinator_denied(self, ctx: RequestContext, key_type: int, key: str) -> Any:
        """With an authorizer: a group needs DESCRIBE on it, a transactional id DESCRIBE on it, a
        mirror (KIP-1279) or share (KIP-932) coordinator CLUSTER_ACTION on the cluster. The
        error, or None."""
        authz = self.s.authorizer
        if authz is None:
            return None
        if key_type == GROUP_KEY and not allowed(
            authz, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key
        ):
            return ErrorCode.group_authorization_failed
        if key_type == TXN_KEY and not allowed(
            authz, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            return ErrorCode.transactional_id_authorization_failed
        if key_type in (MIRROR_KEY, SHARE_KEY) and not cluster_allowed(
            authz, ctx, AclOperation.CLUSTER_ACTION
        ):
            return ErrorCode.cluster_authorization_failed
        return None

    async def _ensure_topic(self, key_type: int) -> str | None:
        """The coordinator topic for a key type, created on first use; None: it cannot be."""
        if key_type == TXN_KEY:
            return TRANSACTION_STATE_TOPIC if await self.ensure_transaction_state_topic() else None
        if key_type == MIRROR_KEY:
            return MIRROR_STATE_TOPIC if await self.ensure_mirror_state_topic() else None
        if key_type == SHARE_KEY:
            return SHARE_STATE_TOPIC if await self.ensure_share_state_topic() else None
        await self.ensure_offsets_topic()
        return OFFSETS_TOPIC

    def _locate(
        self, ctx: RequestContext, key_type: int, key: str, row: dict[str, Any], topic: str | None
    ) -> None:
        """The coordinator is the leader of the key's partition of the coordinator topic
        (Kafka's abs(hashCode) % partitions), on the listener the request came in on."""
        img = self.s.image()
        t = img.topics.get(topic) if topic is not None else None
        if t is None or not t.partitions:
            row["error_code"] = ErrorCode.coordinator_not_available
            return
        part = t.partitions.get(partition_for(key, len(t.partitions)))
        broker = img.brokers.get(part.leader) if part is not None else None
        ep = broker.endpoint(ctx.listener) if broker is not None and not broker.fenced else None
        if ep is None:
            row["error_code"] = ErrorCode.coordinator_not_available
            return
        row.update(node_id=broker.broker_id, host=ep.host, port=ep.port)  # type: ignore[union-attr]

    async def find_coordinator(self, ctx: RequestContext, req: Any) -> Any:
        keys = list(getattr(req, "coordinator_keys", ()) or ())
        if not keys and hasattr(req, "key"):
            keys = [req.key]
        key_type = getattr(req, "key_type", GROUP_KEY)
        rows = []
        for key in keys:
            row: dict[str, Any] = {
                "key": key,
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": ErrorCode.none,
                "error_message": None,
            }
            denial = self._coordinator_denied(ctx, key_type, key)
            if denial is not None:
                row["error_code"] = denial
            elif key_type not in (GROUP_KEY, TXN_KEY, MIRROR_KEY) and not (
                key_type == SHARE_KEY and self.share_enabled()
            ):
                row["error_code"] = ErrorCode.invalid_request
                row["error_message"] = f"Unsupported coordinator key type {key_type}"
            elif key_type != GROUP_KEY and not key:
                row["error_code"] = ErrorCode.invalid_request
                row["error_message"] = (
                    "Empty transactional id"
                    if key_type == TXN_KEY
                    else "Empty share coordinator key"
                    if key_type == SHARE_KEY
                    else "Empty mirror coordinator key"
                )
            else:
                self._locate(ctx, key_type, key, row, await self._ensure_topic(key_type))
            rows.append(row)
        cls = REGISTRY.spec(FIND_COORDINATOR).response_type(ctx.api_version)
        data: dict[str, Any] = {"throttle_time": 0, "coordinators": rows}
        if ctx.api_version < 4 and rows:
            first = rows[0]
            data.update(
                error_code=first["error_code"],
                error_message=first["error_message"],
                node_id=first["node_id"],
                host=first["host"],
                port=first["port"],
            )
        return build(cls, data)
