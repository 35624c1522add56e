"""Request, byte and partition metrics in Prometheus form, named after Kafka's JMX metrics.

Served by prometheus-client's HTTP server on ``metrics.port`` (0 disables it). Gauges that mirror
broker state (partitions, log sizes, connections) are computed at scrape time by a collector from a
snapshot taken on the event loop, so the hot paths only bump counters.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.network.connection_quotas import ListenerStats
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from .cleaner_metrics import CleanerCollector, CleanerSnapshot
from .cluster_metrics import ClusterCollector, ClusterCounts
from .gc_metrics import GcCollector, GcStats
from .group_metrics import GroupCollector, GroupSnapshot
from .image_metrics import ImageCollector, ImageInfo
from .log_file_metrics import LogFileCollector, LogFileStats
from .mirror_metrics import MirrorCollector, MirrorSnapshot
from .mirror_sync_metrics import MirrorSyncCollector, SyncSnapshot
from .quota_metrics import QuotaCollector, QuotaSnapshot
from .raft_metrics import QuorumCollector, QuorumSnapshot
from .retry_metrics import RetryCollector, RetrySnapshot
from .txn_metrics import TxnCollector, TxnSnapshot

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class MetricsServeError(Exception):
    """The Prometheus endpoint could not listen on ``host:port`` (port taken, address not here)."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(f"cannot listen on {host}:{port}: {cause}")
        self.host, self.port, self.cause = host, port, cause


def error_name(code: int) -> str:
    """Kafka's name for an error code (NONE, UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    for enum in (ErrorCode, MirrorErrorCode):
        try:
            return enum(code).name.upper()
        except ValueError:
            continue
    return f"UNKNOWN_{code}"


def api_name(key: int) -> str:
    try:
        return "".join(p.capitalize() for p in REGISTRY.spec(key).name.split("_"))
    except KeyError:
        return f"Unknown{key}"


PartitionStats = tuple[str, int, int, int, int]  # topic, partition, size, end offset, start offset


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """Broker state for one scrape, copied on the event loop (see `on_loop.read_on_loop`)."""

    partitions: list[PartitionStats]
    connections: int
    # connections closed at accept, per limit (max.connections.per.ip; max.connections blocks)
    connections_rejected: dict[str, int] = field(default_factory=dict)
    # listener -> what its acceptor did (connections accepted and closed, creation-rate waits)
    listeners: dict[str, ListenerStats] = field(default_factory=dict)
    # (request bytes held or reserved, seconds at queued.max.request.bytes in all)
    request_memory: tuple[int, float] = (0, 0.0)
    # leaders, under-replicated, under min ISR, ISR shrinks, ISR expands (ReplicationStats)
    replication: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    idle_closed: int = 0  # connections closed by connections.max.idle.ms
    # hosted logs that refuse appends after a failed write (KAFKA_STORAGE_ERROR until restart)
    failed_logs: int = 0


class _StateCollector(Collector):
    def __init__(self, read: Callable[[], StateSnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []  # the loop did not answer: leave the series out rather than guess
        count = GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount", "Partitions hosted by this node"
        )
        size = GaugeMetricFamily(
            "kafka_log_log_size",
            "Size of a partition's log in bytes",
            labels=["topic", "partition"],
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset",
            "Log end offset of a partition",
            labels=["topic", "partition"],
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset",
            "Log start offset of a partition",
            labels=["topic", "partition"],
        )
        n = 0
        for topic, partition, size_bytes, log_end, log_start in snap.partitions:
            n += 1
            labels = [topic, str(partition)]
            size.add_metric(labels, size_bytes)
            end.add_metric(labels, log_end)
            start.add_metric(labels, log_start)
        count.add_metric([], n)
        conns = GaugeMetricFamily(
            "kafka_server_socket_server_connection_count", "Open client connections"
        )
        conns.add_metric([], snap.connections)
        rejected = CounterMetricFamily(
            "kafka_network_connections_rejected",
            "New connections closed at once by max.connections.per.ip",
            labels=["limit"],
        )
        for limit, n in sorted(snap.connections_rejected.items()):
            rejected.add_metric([limit], n)
        pool = GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolused",
            "Request bytes the node holds or has reserved for frames arriving (Kafka's "
            "MemoryPoolUsed; bounded by queued.max.request.bytes)",
        )
        pool.add_metric([], snap.request_memory[0])
        depleted = CounterMetricFamily(
            "kafka_network_memory_pool_depleted_seconds",
            "Seconds the node stopped reading sockets at queued.max.request.bytes, in all",
        )
        depleted.add_metric([], snap.request_memory[1])
        failed = GaugeMetricFamily(
            "kmirror_log_write_failed_partitions",
            "Hosted partitions whose log refuses appends (KAFKA_STORAGE_ERROR) after a failed "
            "write, until the node restarts",
        )
        failed.add_metric([], snap.failed_logs)
        return [
            count,
            size,
            end,
            start,
            conns,
            rejected,
            *_listeners(snap),
            pool,
            depleted,
            failed,
            *_replication(snap),
        ]


def _listeners(snap: StateSnapshot) -> list[Any]:
    """Per-listener acceptor series (Kafka's socket-server-metrics and acceptor metrics)."""
    families: list[tuple[type[Any], str, str, Callable[[ListenerStats], float]]] = [
        (
            GaugeMetricFamily,
            "kafka_server_socket_server_listener_connection_count",
            "Open connections, per listener (Kafka's connection-count)",
            lambda s: s.created - s.closed,
        ),
        (
            CounterMetricFamily,
            "kafka_server_socket_server_connection_creation",
            "Connections accepted and served, per listener (connection-creation-rate: rate())",
            lambda s: s.created,
        ),
        (
            CounterMetricFamily,
            "kafka_server_socket_server_connection_close",
            "Connections closed, per listener (connection-close-rate: rate())",
            lambda s: s.closed,
        ),
        (
            CounterMetricFamily,
            "kafka_network_acceptor_throttled_connections",
            "New connections that waited for max.connection.creation.rate (node or listener)",
            lambda s: s.throttled,
        ),
        (
            CounterMetricFamily,
            "kafka_network_acceptor_throttle_seconds",
            "Seconds new connections waited for max.connection.creation.rate, in all",
            lambda s: s.throttle_seconds,
        ),
        (
            CounterMetricFamily,
            "kafka_network_acceptor_blocked_seconds",
            "Seconds the listener stopped accepting at max.connections (node or listener); "
            "rate() is Kafka's AcceptorBlockedPercent",
            lambda s: s.blocked_seconds,
        ),
    ]
    out: list[Any] = []
    for kind, name, doc, value in families:
        family = kind(name, doc, labels=["listener"])
        for listener, stats in sorted(snap.listeners.items()):
            family.add_metric([listener], value(stats))
        out.append(family)
    idle = CounterMetricFamily(
        "kafka_network_idle_connections_closed",
        "Connections closed after connections.max.idle.ms without traffic",
    )
    idle.add_metric([], snap.idle_closed)
    out.append(idle)
    return out


def _replication(snap: StateSnapshot) -> list[Any]:
    leaders, under, under_min, shrinks, expands = snap.replication
    out: list[Any] = []
    for name, doc, value in (
        ("leadercount", "Partitions this node leads", leaders),
        ("underreplicatedpartitions", "Led partitions whose ISR lacks a replica", under),
        ("underminisrpartitioncount", "Led partitions whose ISR is under min.insync", under_min),
    ):
        g = GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc)
        g.add_metric([], value)
        out.append(g)
    for name, doc, value in (
        ("isrshrinks", "ISR shrinks the controller accepted", shrinks),
        ("isrexpands", "ISR expansions the controller accepted", expands),
    ):
        c = CounterMetricFamily(f"kafka_server_replicamanager_{name}", doc)
        c.add_metric([], value)
        out.append(c)
    return out


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kafka_network_request_requests",
            "Requests handled, per API and version (Kafka's RequestsPerSec)",
            ["request", "version"],
            registry=self.registry,
        )
        self.errors = Counter(
            "kafka_network_request_errors",
            "Error codes in responses, per API (Kafka's ErrorsPerSec; NONE included; Produce "
            "and Fetch are not counted)",
            ["request", "error"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "kafka_network_request_total_time_seconds",
            "Time to handle a request, per API",
            ["request"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytes_in",
            "Bytes produced, per topic",
            ["topic"],
            registry=self.registry,
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytes_out",
            "Bytes fetched by consumers",
            registry=self.registry,
        )
        # Kafka's ReplicationBytesOutPerSec: follower fetches, kept out of bytes_out
        self.replication_bytes_out = Counter(
            "kafka_server_brokertopicmetrics_replication_bytes_out",
            "Bytes fetched by follower replicas",
            registry=self.registry,
        )
        # KIP-392: consumer fetches this node served as a follower, and the leader's answers
        # sending a consumer to another replica
        self.follower_fetches = Counter(
            "kafka_server_fetch_consumer_follower_reads",
            "Consumer Fetch requests that read records from partitions this node follows",
            registry=self.registry,
        )
        self.follower_fetch_bytes = Counter(
            "kafka_server_fetch_consumer_follower_bytes",
            "Record bytes consumer Fetch requests read from partitions this node follows",
            registry=self.registry,
        )
        self.preferred_replica_answers = Counter(
            "kafka_server_fetch_preferred_read_replica_answers",
            "Partitions this leader answered with another preferred read replica",
            registry=self.registry,
        )
        self._names: dict[int, str] = {}
        self._children: dict[tuple[int, int], tuple[Any, Any]] = {}

    def on_request(
        self, api_key: int, version: int, seconds: float, errors: Mapping[int, int] | None = None
    ) -> None:
        children = self._children.get((api_key, version))
        if children is None:
            name = self._name(api_key)
            children = self._children[(api_key, version)] = (
                self.requests.labels(name, str(version)),
                self.latency.labels(name),
            )
        children[0].inc()
        children[1].observe(seconds)
        if errors:
            name = self._name(api_key)
            for code, n in errors.items():
                self.errors.labels(name, error_name(code)).inc(n)

    def _name(self, api_key: int) -> str:
        name = self._names.get(api_key)
        if name is None:
            name = self._names[api_key] = api_name(api_key)
        return name

    def on_bytes_in(self, topic: str, n: int) -> None:
        self.bytes_in.labels(topic).inc(n)

    def on_bytes_out(self, n: int, *, replication: bool = False) -> None:
        (self.replication_bytes_out if replication else self.bytes_out).inc(n)

    def on_follower_read(self, n: int) -> None:
        self.follower_fetches.inc()
        self.follower_fetch_bytes.inc(n)

    def on_preferred_replica(self) -> None:
        self.preferred_replica_answers.inc()

    def watch_state(self, read: Callable[[], StateSnapshot | None]) -> None:
        """Partition and connection gauges, from the snapshot ``read`` returns per scrape."""
        self.registry.register(_StateCollector(read))

    def watch_mirrors(self, read: Callable[[], MirrorSnapshot | None]) -> None:
        """The ``kafka_server_mirror_*`` series, from the snapshot ``read`` returns per scrape."""
        self.registry.register(MirrorCollector(read))

    def watch_mirror_sync(self, read: Callable[[], SyncSnapshot | None]) -> None:
        """The ``kmirror_mirror_sync_*`` series (synchronous mirroring on the source)."""
        self.registry.register(MirrorSyncCollector(read))

    def watch_cleaner(self, read: Callable[[], CleanerSnapshot | None]) -> None:
        """The log cleaner's ``kafka_log_logcleaner*`` gauges, from ``read`` per scrape."""
        self.registry.register(CleanerCollector(read))

    def watch_quorum(self, read: Callable[[], QuorumSnapshot | None]) -> None:
        """The metadata quorum's ``kafka_server_raft_metrics_*`` and controller gauges, from
        the snapshot ``read`` returns per scrape (``quorum.quorum_metrics.quorum_snapshot``)."""
        self.registry.register(QuorumCollector(read))

    def watch_quotas(self, read: Callable[[], QuotaSnapshot | None]) -> None:
        """Client quota series (``quota_metrics``), from the snapshot ``read`` returns."""
        self.registry.register(QuotaCollector(read))

    def watch_groups(self, read: Callable[[], GroupSnapshot | None]) -> None:
        """The group coordinator's ``kafka_server_group_coordinator_metrics_*`` series."""
        self.registry.register(GroupCollector(read))

    def watch_transactions(self, read: Callable[[], TxnSnapshot | None]) -> None:
        """The transaction coordinator's ``kmirror_txn_coordinator_*`` series."""
        self.registry.register(TxnCollector(read))

    def watch_cluster(self, read: Callable[[], ClusterCounts | None]) -> None:
        """``kafka_controller_kafkacontroller_offlinepartitionscount`` and the cluster's topic,
        partition and active broker counts, from this node's metadata image."""
        self.registry.register(ClusterCollector(read))

    def watch_image(self, read: Callable[[], ImageInfo | None]) -> None:
        """``kmirror_metadata_image_info{digest,offset}``, from ``read`` per scrape."""
        self.registry.register(ImageCollector(read))

    def watch_log_files(self, read: Callable[[], LogFileStats]) -> None:
        """``kafka_log_open_file_failures_total`` and the open-file cache's series."""
        self.registry.register(LogFileCollector(read))

    def watch_retries(self, read: Callable[[], RetrySnapshot | None]) -> None:
        """``kmirror_node_request_retries`` and the controller's written-state series."""
        self.registry.register(RetryCollector(read))

    def watch_gc(self, read: Callable[[], GcStats | None]) -> None:
        """``kmirror_gc_*``: the cyclic garbage collector's pauses and frozen heap."""
        self.registry.register(GcCollector(read))

    def serve(self, host: str, port: int) -> Any:
        try:
            server, _thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            raise MetricsServeError(host, port, e) from e
        return server
