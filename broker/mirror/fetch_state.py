"""What the mirror fetchers keep: the Kafka error codes and fetch defaults they work with, one
`FetchPartition` per mirrored partition (a new object each time it is added, so a late answer
for an old one is recognised), what a Fetch asked for each partition (`SentFetch`: its answer is
matched to it), one `FetchMirror` per mirror, and the status and counters --describe and the
metrics exporter read. `FetcherHandle` is what a partition and a mirror hold of the fetch loop
that has them (`source_fetcher.SourceFetcher`), so this module imports none of the fetcher's.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple, Protocol

from ..network.stats import NetworkStats
from .fetch_throttle import ByteRate
from .source import SourceClient

Key = tuple[str, int]  # (topic, partition)

# Kafka error codes the fetcher reacts to.
NONE: Final = 0
OFFSET_OUT_OF_RANGE: Final = 1
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
LEADER_NOT_AVAILABLE: Final = 5
NOT_LEADER_OR_FOLLOWER: Final = 6
REPLICA_NOT_AVAILABLE: Final = 9
KAFKA_STORAGE_ERROR: Final = 56
FETCH_SESSION_ID_NOT_FOUND: Final = 70
INVALID_FETCH_SESSION_EPOCH: Final = 71
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
OFFSET_NOT_AVAILABLE: Final = 78
UNKNOWN_TOPIC_ID: Final = 100
INCONSISTENT_TOPIC_ID: Final = 103
FETCH_SESSION_TOPIC_ID_ERROR: Final = 106

DEFAULT_MAX_WAIT_MS: Final = 500
DEFAULT_MIN_BYTES: Final = 1
DEFAULT_MAX_BYTES: Final = 50 * 1024 * 1024
DEFAULT_PARTITION_MAX_BYTES: Final = 1024 * 1024
RETRY_BACKOFF_MS: Final = 100
RETRY_BACKOFF_MAX_MS: Final = 2000
# --describe: a source offset older than this many fetch waits (or MIN_STALE_AFTER_MS) while
# the partition is fetched is not current any more: its lag is shown as unknown
STALE_AFTER_WAITS: Final = 3
MIN_STALE_AFTER_MS: Final = 3000


@dataclass(frozen=True, slots=True)
class FetchStatus:
    source_high_watermark: int  # -1 until the first answer
    source_last_stable_offset: int
    source_log_start_offset: int
    local_log_end_offset: int
    # records the mirror can still copy: source LSO (HW while unknown) - local LEO, never
    # negative (READ_COMMITTED fetches stop at the source's LSO: an open transaction is not lag)
    lag: int
    last_fetch_ms: int  # wall clock of the last answer for this partition, -1 never
    bytes_per_sec: float
    source_leader_id: int  # -1 while looking for the leader
    error: str | None  # the last problem, None when fetching fine
    failed: bool  # handed to on_failed; not fetched any more
    held: int = 0  # source HW - source LSO: records behind transactions open on the source


class SourceFreshness(NamedTuple):
    """How current a partition's source high watermark is, for --describe."""

    source_high_watermark: int  # -1 never learnt
    learnt_ms: int  # wall clock when the source last confirmed it, -1 never
    error: str | None  # the last fetch problem since the last good answer, None if none
    fetching: bool  # False: no longer fetched (paused, ...): the last known values, frozen
    stale_after_ms: int  # older than this while fetching: the source offset is not current
    source_last_stable_offset: int = -1  # -1 never learnt


@dataclass(slots=True)
class FetcherCounters:
    """Running totals of one fetcher (mirror, source broker, fetcher id) for the metrics exporter.
    The fetch loop only adds to them; they outlive fetcher restarts, so they never go back."""

    requests: int = 0  # Fetch responses received
    errors: int = 0  # failed Fetch round trips (connection lost, error code, bad response)
    response_bytes: int = 0  # Fetch response bodies received
    appended_bytes: int = 0  # record bytes appended to local logs
    throttled_bytes: int = 0  # of those, bytes of throttled partitions
    throttled_seconds: float = 0.0  # time spent waiting with every partition over the throttle
    # time spent waiting out the source's throttle_time_ms (its client quota on this fetcher)
    source_throttled_seconds: float = 0.0
    network: NetworkStats = field(default_factory=NetworkStats)  # its source connections


class FetcherHandle(Protocol):
    """What the assignment and the manager do with a running fetch loop."""

    @property
    def task(self) -> asyncio.Task[None] | None: ...
    def assign(self, p: FetchPartition) -> None: ...
    def drop(self, p: FetchPartition) -> None: ...
    def stop(self) -> None: ...


class FetchPartition:
    """One mirrored partition; a new object each time the partition is added."""

    def __init__(
        self,
        mirror: str,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        source_topic: str | None = None,
    ) -> None:
        self.mirror = mirror
        self.topic = topic
        # the source's name for it: ``topic`` minus the mirror's mirror.topic.prefix
        self.source_topic = source_topic or topic
        self.partition = partition
        self.topic_id = topic_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.fetcher: FetcherHandle | None = None
        self.removed = False
        self.failed = False
        self.error: str | None = None
        self.src_hw = -1
        self.src_lso = -1
        self.src_log_start = -1
        self.last_fetch_ms = -1
        self.hw_ms = -1  # wall clock when src_hw was last confirmed by the source
        self.rate = ByteRate()
        self.throttled = False  # listed in mirror.replication.throttled.replicas for this broker
        self.retry_at = 0.0
        self.failures = 0
        self.idle = asyncio.Event()
        self.idle.set()

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)

    def __repr__(self) -> str:
        return f"{self.mirror}:{self.topic}-{self.partition}"


@dataclass(slots=True)
class SentFetch:
    """What a Fetch asked the source for one partition (its answer is matched to this)."""

    state: FetchPartition
    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


class FetchMirror:
    """One mirror: its source client, partitions, fetchers and fetch settings."""

    def __init__(self, name: str, config: Mapping[str, str], source: SourceClient) -> None:
        self.name = name
        self.config = dict(config)
        self.source = source
        self.partitions: dict[Key, FetchPartition] = {}
        self.fetchers: dict[tuple[int, int], FetcherHandle] = {}  # (fetcher id, node) -> fetcher
        self.refresh = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.max_wait_ms = int(config.get("fetch.max.wait.ms", DEFAULT_MAX_WAIT_MS))
        self.min_bytes = int(config.get("fetch.min.bytes", DEFAULT_MIN_BYTES))
        self.max_bytes = int(config.get("fetch.max.bytes", DEFAULT_MAX_BYTES))
        self.partition_max_bytes = int(
            config.get("max.partition.fetch.bytes", DEFAULT_PARTITION_MAX_BYTES)
        )


def copyable_lag(source_hw: int, source_lso: int, local_leo: int) -> tuple[int, int]:
    """(lag, held): the records the mirror can still copy (to the source's last stable offset,
    where READ_COMMITTED fetches stop; to its high watermark while the LSO is unknown), and the
    records between the two, held behind transactions open on the source."""
    if source_hw < 0 or local_leo < 0:
        return 0, 0
    limit = source_lso if 0 <= source_lso <= source_hw else source_hw
    return max(0, limit - local_leo), max(0, source_hw - max(limit, local_leo))
