"""The KIP-1279 mirror coordinator: mirror partition states and LMEs in ``__mirror_state``."""

from broker.coordinator.mirror.coordinator import (
    MirrorCoordinator,
    MirrorStateEntry,
    coordinator_key,
    kafka_uuid_str,
)
from broker.coordinator.mirror.shard import InvalidMirrorStateError

__all__ = [
    "InvalidMirrorStateError",
    "MirrorCoordinator",
    "MirrorStateEntry",
    "coordinator_key",
    "kafka_uuid_str",
]
