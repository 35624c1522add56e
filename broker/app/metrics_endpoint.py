"""The Prometheus endpoint: what each watcher reads of the node, on the event loop (or, for the
immutable image and the file cache, from any thread).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..gc_policy import installed_stats
from ..log import file_cache
from ..metadata.image import MetadataImage
from ..metadata.snapshot import image_info
from ..metrics.broker_metrics import StateSnapshot
from ..metrics.cluster_metrics import ClusterCounts
from ..metrics.log_file_metrics import LogFileStats
from ..metrics.on_loop import read_on_loop
from ..metrics.retry_metrics import RetrySnapshot
from ..mirror.metrics_snapshot import build_snapshot
from ..quorum.quorum_metrics import quorum_snapshot

if TYPE_CHECKING:
    from .node import Node


def serve_metrics(node: Node) -> None:
    """The Prometheus endpoint; each watcher reads its part on the event loop (or, for the
    immutable image, from any thread)."""
    loop = asyncio.get_running_loop()
    node.metrics.watch_state(read_on_loop(loop, lambda: _state_snapshot(node), "partition metrics"))
    node.metrics.watch_mirrors(
        read_on_loop(
            loop,
            lambda: build_snapshot(node.image, node.mirrors, node.fetchers, node.metadata_sync),
            "mirror metrics",
        )
    )
    node.metrics.watch_quorum(
        read_on_loop(
            loop,
            lambda: quorum_snapshot(
                node.quorum.driver.core,
                node.clock.now_ms(),
                lambda: sum(1 for b in node.image.brokers.values() if b.fenced),
            ),
            "quorum metrics",
        )
    )
    node.metrics.watch_quotas(
        read_on_loop(loop, node.client_throttle.metrics_snapshot, "quota metrics")
    )
    node.metrics.watch_groups(
        read_on_loop(loop, node.groups.metrics_snapshot, "group coordinator metrics")
    )
    node.metrics.watch_transactions(
        read_on_loop(loop, node.txn_coordinator.metrics_snapshot, "transaction coordinator metrics")
    )
    node.metrics.watch_image(lambda: image_info(node.image))  # immutable: any thread
    node.metrics.watch_cluster(lambda: cluster_counts(node.image))  # immutable: any thread
    node.metrics.watch_log_files(lambda: LogFileStats(*file_cache.stats()))  # any thread
    node.metrics.watch_gc(installed_stats)  # any thread
    node.metrics.watch_retries(read_on_loop(loop, lambda: _retry_snapshot(node), "retry metrics"))
    node.metrics.watch_cleaner(read_on_loop(loop, node.cleaner.metrics_snapshot, "cleaner metrics"))
    node.metrics.serve(node.config.metrics_host, node.config.metrics_port)


def _retry_snapshot(node: Node) -> RetrySnapshot:
    retries = {
        "AlterPartition": node.alter_partition_sender.retries,
        "ControllerChannel": node.controller_channel.retries,
        "LifecycleChannel": node.lifecycle_channel.retries,
    }
    if node.lifecycle is not None:
        retries["BrokerRegistration"] = node.lifecycle.retries
    written = node.controller.written
    return RetrySnapshot(retries, written.pending, written.rollbacks)


def _state_snapshot(node: Node) -> StateSnapshot:
    server = node.server
    return StateSnapshot(
        _partition_stats(node),
        len(server.connections) if server else 0,
        dict(server.rejected) if server else {},
        server.listener_snapshot() if server else {},
        ((server.queued_request_bytes, server.memory_depleted_seconds) if server else (0, 0.0)),
        tuple(node.replicas.stats()),  # type: ignore[arg-type]
        server.idle_closed if server else 0,
        sum(1 for h in list(node.replicas.partitions().values()) if h.log.write_error),
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


def _partition_stats(node: Node) -> list[tuple[str, int, int, int, int]]:
    return [
        (t, p, h.log.size_bytes, h.log.log_end_offset, h.log.log_start_offset)
        for (t, p), h in list(node.replicas.partitions().items())
    ]
