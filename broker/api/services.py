"""What handlers share: the node's identity, the current image and the subsystems they call."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from ..mirror.sync_acks import SyncAcks


@dataclass(slots=True)
class Services:
    node_id: int
    cluster_id: str
    image: Callable[[], MetadataImage]
    controller: Any  # broker.controller.Controller
    replicas: Any  # broker.replication.ReplicaManager
    log_manager: Any
    config: Any  # broker.config ServerConfig
    now_ms: Callable[[], int]
    auto_create_topics: bool = True
    # Topic-level config description rows for DescribeConfigs / CreateTopics v5+
    describe_topic_configs: Callable[[str], list[dict[str, Any]]] = lambda name: []
    describe_broker_configs: Callable[[], list[dict[str, Any]]] = lambda: []
    # a group's dynamic config rows (resource type GROUP, 32)
    describe_group_configs: Callable[[str], list[dict[str, Any]]] = lambda name: []
    # (topic, partition) -> may Produce/DeleteRecords write there? Replaced by the mirror
    # manager's state-aware check; None: any topic with a mirror.name is read-only.
    mirror_writable: Callable[[str, int], bool] | None = None
    # synchronous mirroring on the source (issue 30): Fetch reports, acks=all waits
    mirror_sync: SyncAcks | None = None
    # broker.security.authorizer.Authorizer when authorizer.class.name is set; None: allow all
    authorizer: Any = None
    # KIP-890 (transaction.partition.verification.enable): asks the transaction coordinator
    # whether partitions are in a producer's transaction; None: Produce does not verify
    verify_txn: (
        Callable[
            [str, int, int, frozenset[tuple[str, int]]],
            Awaitable[dict[tuple[str, int], ErrorCode]],
        ]
        | None
    ) = None

    # KIP-919 DescribeCluster for controllers: (node id, host, port) of each voter's controller
    # listener, the active controller's id (-1: none known), the controller listener names
    controller_endpoints: Callable[[], list[tuple[int, str, int]]] = lambda: []
    active_controller: Callable[[], int] = lambda: -1
    controller_listeners: frozenset[str] = frozenset()

    def not_hosted_error(self, topic: str, partition: int) -> ErrorCode:
        """For a partition this node does not host: NOT_LEADER_OR_FOLLOWER when the cluster
        has it (another node leads it; the client refreshes its metadata and goes there),
        UNKNOWN_TOPIC_OR_PARTITION when it does not exist, as Kafka's ReplicaManager answers."""
        t = self.image().topics.get(topic)
        if t is not None and partition in t.partitions:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def writable(self, topic: str, partition: int) -> bool:
        """KIP-1279: mirror topics are read-only until failed over."""
        if self.mirror_writable is not None:
            return self.mirror_writable(topic, partition)
        return not self.image().config(TOPIC_RESOURCE, topic).get(MIRROR_NAME_CONFIG)
