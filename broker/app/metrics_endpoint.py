"""The Prometheus endpoint: what each watcher reads of the node, on the event loop (or, for the
immutable image and the file cache, from any thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..config.server_config import ServerConfig
from ..gc_policy import installed_stats
from ..log import file_cache
from ..log.clock import Clock
from ..metadata.image import MetadataImage
from ..metadata.snapshot import image_info
from ..metrics.broker_metrics import BrokerMetrics, StateSnapshot
from ..metrics.cluster_metrics import ClusterCounts
from ..metrics.log_file_metrics import LogFileStats
from ..metrics.on_loop import read_on_loop
from ..metrics.retry_metrics import RetrySnapshot
from ..mirror.metrics_snapshot import build_snapshot
from ..network.server import KafkaServer
from ..quorum.broker_lifecycle import BrokerLifecycleManager
from ..quorum.quorum_metrics import quorum_snapshot
from ..replication.replica_manager import ReplicaManager
from .parts import NodeParts


def serve_metrics(
    config: ServerConfig,
    clock: Clock,
    metrics: BrokerMetrics,
    image: Callable[[], MetadataImage],
    parts: NodeParts,
    server: KafkaServer,
    lifecycle: Callable[[], BrokerLifecycleManager | None],
) -> None:
    """The Prometheus endpoint; each watcher reads its part on the event loop (or, for the
    immutable image, from any thread). ``lifecycle``: the broker registration, once made."""
    loop = asyncio.get_running_loop()
    mirroring, quorum = parts.mirroring, parts.quorum
    replicas = parts.replication.replicas
    metrics.watch_state(
        read_on_loop(loop, lambda: _state_snapshot(server, replicas), "partition metrics")
    )
    metrics.watch_mirrors(
        read_on_loop(
            loop,
            lambda: build_snapshot(
                image(), mirroring.mirrors, mirroring.fetchers, mirroring.metadata_sync
            ),
            "mirror metrics",
        )
    )
    sync = parts.services.services.mirror_sync
    if sync is not None:
        metrics.watch_mirror_sync(read_on_loop(loop, sync.metrics_snapshot, "mirror sync metrics"))
    metrics.watch_quorum(
        read_on_loop(
            loop,
            lambda: quorum_snapshot(
                quorum.quorum.driver.core,
                clock.now_ms(),
                lambda: sum(1 for b in image().brokers.values() if b.fenced),
            ),
            "quorum metrics",
        )
    )
    metrics.watch_quotas(
        read_on_loop(loop, parts.apis.client_throttle.metrics_snapshot, "quota metrics")
    )
    coordinators = parts.coordinators
    metrics.watch_groups(
        read_on_loop(loop, coordinators.groups.metrics_snapshot, "group coordinator metrics")
    )
    metrics.watch_transactions(
        read_on_loop(
            loop, coordinators.txn_coordinator.metrics_snapshot, "transaction coordinator metrics"
        )
    )
    metrics.watch_image(lambda: image_info(image()))  # immutable: any thread
    metrics.watch_cluster(lambda: cluster_counts(image()))  # immutable: any thread
    metrics.watch_log_files(lambda: LogFileStats(*file_cache.stats()))  # any thread
    metrics.watch_gc(installed_stats)  # any thread
    metrics.watch_retries(
        read_on_loop(loop, lambda: _retry_snapshot(parts, lifecycle()), "retry metrics")
    )
    metrics.watch_cleaner(
        read_on_loop(loop, parts.storage.cleaner.metrics_snapshot, "cleaner metrics")
    )
    metrics.serve(config.metrics_host, config.metrics_port)


def _retry_snapshot(parts: NodeParts, lifecycle: BrokerLifecycleManager | None) -> RetrySnapshot:
    retries = {
        "AlterPartition": parts.replication.alter_partition_sender.retries,
        "ControllerChannel": parts.quorum.controller_channel.retries,
        "LifecycleChannel": parts.quorum.lifecycle_channel.retries,
    }
    if lifecycle is not None:
        retries["BrokerRegistration"] = lifecycle.retries
    written = parts.controller.controller.written
    return RetrySnapshot(retries, written.pending, written.rollbacks)


def _state_snapshot(server: KafkaServer, replicas: ReplicaManager) -> StateSnapshot:
    return StateSnapshot(
        _partition_stats(replicas),
        len(server.connections),
        dict(server.rejected),
        server.listener_snapshot(),
        (server.queued_request_bytes, server.memory_depleted_seconds),
        tuple(replicas.stats()),  # type: ignore[arg-type]
        server.idle_closed,
        sum(1 for h in list(replicas.partitions().values()) if h.log.write_error),
    )


def cluster_counts(image: MetadataImage) -> ClusterCounts:
    """Topics, partitions, partitions without a leader and unfenced brokers in ``image``."""
    partitions = offline = 0
    for t in image.topics.values():
        for p in t.partitions.values():
            partitions += 1
            offline += p.leader < 0
    active = sum(1 for b in image.brokers.values() if not b.fenced)
    return ClusterCounts(len(image.topics), partitions, offline, active)


def _partition_stats(replicas: ReplicaManager) -> list[tuple[str, int, int, int, int]]:
    return [
        (t, p, h.log.size_bytes, h.log.log_end_offset, h.log.log_start_offset)
        for (t, p), h in list(replicas.partitions().items())
    ]
