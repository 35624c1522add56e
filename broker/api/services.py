"""What handlers share: the node's identity, the current image and the subsystems they call."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..metadata.image import MetadataImage


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
    extra: dict[str, Any] = field(default_factory=dict)
