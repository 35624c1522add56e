"""Group coordinator settings (Kafka's broker config names in the comments), and a group's own
overrides of some (per-group dynamic configs, `broker.config.group_configs`)."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.config import group_configs as gc


def _no_overrides(group_id: str) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50  # offsets.topic.num.partitions
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_group_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    # group.consumer.assignors: the first is the default when no member asks for one
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: which online conversions of a group with members
    # (classic <-> consumer) are allowed: bidirectional, upgrade, downgrade or disabled
    consumer_migration_policy: str = "bidirectional"
    share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    share_heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    share_max_size: int = 200  # group.share.max.size
    # Extra real-time slack past a rebalance timeout before an awaiting call gives up;
    # timers normally answer first, this only guarantees nothing waits forever.
    wait_guard_ms: int = 30_000
    # a group's dynamic configs (GROUP ConfigRecords in the metadata image), read when used
    group_overrides: Callable[[str], Mapping[str, str]] = _no_overrides

    def _int(self, group_id: str, name: str, default: int) -> int:
        value = self.group_overrides(group_id).get(name)
        return int(value) if value is not None else default

    def consumer_session_ms(self, group_id: str) -> int:
        return self._int(group_id, gc.CONSUMER_SESSION, self.consumer_session_timeout_ms)

    def consumer_heartbeat_ms(self, group_id: str) -> int:
        return self._int(group_id, gc.CONSUMER_HEARTBEAT, self.consumer_heartbeat_interval_ms)

    def share_session_ms(self, group_id: str) -> int:
        return self._int(group_id, gc.SHARE_SESSION, self.share_session_timeout_ms)

    def share_heartbeat_ms(self, group_id: str) -> int:
        return self._int(group_id, gc.SHARE_HEARTBEAT, self.share_heartbeat_interval_ms)

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "downgrade")
