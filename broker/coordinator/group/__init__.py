"""The classic consumer group coordinator (JoinGroup/SyncGroup/Heartbeat... and offsets)."""

from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.coordinator import GroupCoordinator

__all__ = ["GroupConfig", "GroupCoordinator"]
