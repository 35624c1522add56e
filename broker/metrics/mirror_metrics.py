"""KIP-1279 mirror metrics in Prometheus form (``kafka_server_mirror_*``).

Every series is computed at scrape time from a `MirrorSnapshot`: the fetch loop only adds to plain
integer counters, and the snapshot (built on the node's event loop by `on_loop.read_on_loop`, so it sees
consistent state) copies them together with the state driver's and the metadata sync's view.
Rates (the KIP's BytesPerSec, RequestsPerSec, ByteRate, MinFetchRate) are left to PromQL's
``rate()`` over the ``_total`` counters. docs/mirroring.md maps each series to the KIP's MBean.
This module knows nothing of the broker layers: the snapshot is plain data.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..network.stats import NetworkStats

PREFIX = "kafka_server_mirror_"


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """One mirror partition hosted by this node."""

    mirror: str
    topic: str
    partition: int
    state: str | None  # the state driver's (PREPARING, MIRRORING, ...); None: not known to it
    # records the mirror can still copy (to the source's LSO: READ_COMMITTED fetches stop
    # there); None: not fetched / no answer
    lag: int | None
    fetch_failing: bool = False  # the last fetch attempt failed, or the fetcher gave it up
    # what a read_committed consumer is behind: source LSO - local LSO (a transaction left open
    # here, e.g. a marker that could not be read, shows as lag although every byte is copied)
    committed_lag: int | None = None
    # source HW - source LSO: records behind transactions open on the source (not lag)
    held: int | None = None


@dataclass(frozen=True, slots=True)
class FetcherRow:
    """Totals of one fetcher: (mirror, source broker, fetcher id), as the KIP's client id."""

    mirror: str
    source_broker: int
    fetcher_id: int
    alive: bool | None  # its task runs; False: it died; None: no such fetcher at the moment
    requests: int = 0
    errors: int = 0
    response_bytes: int = 0
    appended_bytes: int = 0
    throttled_bytes: int = 0
    throttled_seconds: float = 0.0
    network: NetworkStats = field(default_factory=NetworkStats)  # its source connections
    source_throttled_seconds: float = 0.0  # waiting out the source's throttle_time_ms


@dataclass(frozen=True, slots=True)
class MirrorSnapshot:
    mirrors: tuple[str, ...]  # every mirror defined in the cluster (series exist from the start)
    states: tuple[str, ...]  # every state name, reported per mirror even when no partition has it
    partitions: tuple[PartitionRow, ...] = ()
    fetchers: tuple[FetcherRow, ...] = ()
    sync_errors: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (mirror, kind)
    sync_skipped: Mapping[tuple[str, str], int] = field(default_factory=dict)
    sync_error_kinds: tuple[str, ...] = ()  # reported as 0 per mirror until they occur
    last_refresh_ms: Mapping[str, int] = field(default_factory=dict)
    throttle_rate: float = 0.0  # mirror.replication.throttled.rate in force; 0: none set
    # per mirror: partitions this node failed because replicas did not complete the LME
    # truncation within mirror.truncation.timeout.ms
    truncation_timeouts: Mapping[str, int] = field(default_factory=dict)


class MirrorCollector(Collector):
    """Turns the snapshot ``read()`` returns into metric families (None: nothing to report)."""

    def __init__(self, read: Callable[[], MirrorSnapshot | None]) -> None:
        self._read = read

    def describe(self) -> Iterable[Any]:
        return []  # registering must not call read(): the node may not be serving yet

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []
        return [*_partition_families(snap), *_fetcher_families(snap), *_sync_families(snap)]


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, labels=labels)


def _counter(name: str, doc: str, labels: list[str] | None = None) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, doc, labels=labels)


def _partition_families(snap: MirrorSnapshot) -> list[Any]:
    states = _gauge("partitions", "Mirror partitions on this node, per state", ["mirror", "state"])
    lag = _gauge(
        "consumer_lag",
        "Records the local copy can still copy from the source: to its last stable offset, "
        "where READ_COMMITTED fetches stop (its high watermark while that is unknown)",
        ["mirror", "topic", "partition"],
    )
    max_lag = _gauge("max_lag", "Largest consumer_lag of a mirror's partitions", ["mirror"])
    committed = _gauge(
        "committed_lag",
        "Offsets a read_committed consumer of the local copy is behind one of the source "
        "(source last stable offset minus the local one)",
        ["mirror", "topic", "partition"],
    )
    held = _gauge(
        "source_open_transaction_records",
        "Records between the source's last stable offset and its high watermark: behind "
        "transactions open on the source, copied once they end (not in consumer_lag)",
        ["mirror", "topic", "partition"],
    )
    failed = _gauge(
        "failed_partitions",
        "Partitions whose last fetch failed (source unreachable, no leader, error) or given up",
        ["mirror"],
    )
    timeouts = _counter(
        "truncation_timeouts",
        "Partitions failed because replicas did not complete the LME truncation within "
        "mirror.truncation.timeout.ms",
        ["mirror"],
    )
    mirrors = set(snap.mirrors)
    counts = {(m, s): 0 for m in snap.mirrors for s in snap.states}
    maxes = dict.fromkeys(snap.mirrors, 0)
    fails = dict.fromkeys(snap.mirrors, 0)
    for row in snap.partitions:
        if row.mirror not in mirrors:
            continue  # the mirror is gone; its partitions are being let go
        if row.state is not None:
            counts[(row.mirror, row.state)] = counts.get((row.mirror, row.state), 0) + 1
        if row.lag is not None:
            lag.add_metric([row.mirror, row.topic, str(row.partition)], row.lag)
            maxes[row.mirror] = max(maxes[row.mirror], row.lag)
        if row.committed_lag is not None:
            committed.add_metric([row.mirror, row.topic, str(row.partition)], row.committed_lag)
        if row.held is not None:
            held.add_metric([row.mirror, row.topic, str(row.partition)], row.held)
        if row.fetch_failing:
            fails[row.mirror] += 1
    for (m, s), n in sorted(counts.items()):
        states.add_metric([m, s], n)
    for m in snap.mirrors:
        max_lag.add_metric([m], maxes[m])
        failed.add_metric([m], fails[m])
        timeouts.add_metric([m], snap.truncation_timeouts.get(m, 0))
    return [states, lag, max_lag, committed, held, failed, timeouts]


def _fetcher_families(snap: MirrorSnapshot) -> list[Any]:
    labels = ["mirror", "source_broker", "fetcher_id"]
    requests = _counter("fetch_requests", "Fetch responses received from the source", labels)
    errors = _counter("fetch_errors", "Failed Fetch round trips to the source", labels)
    fetched = _counter("fetch_bytes", "Bytes of Fetch responses received", labels)
    appended = _counter("appended_bytes", "Record bytes appended to local mirror logs", labels)
    dead = _gauge("dead_fetchers", "Mirror fetcher tasks that died", ["mirror"])
    throttled = _counter(
        "replication_throttled_bytes",
        "Bytes mirrored for partitions under mirror.replication.throttled.replicas",
        ["mirror"],
    )
    waited = _counter(
        "replication_throttled_seconds",
        "Time fetchers waited because all their partitions were over the throttle",
        ["mirror"],
    )
    source_waited = _counter(
        "source_throttled_seconds",
        "Time fetchers waited because the source broker throttled them (throttle_time_ms of "
        "its Fetch responses: a client quota on the fetcher)",
        ["mirror"],
    )
    rate = _gauge(
        "replication_throttled_rate_bytes",
        "mirror.replication.throttled.rate in force, bytes/s (0: unlimited)",
    )
    mirrors = set(snap.mirrors)
    deaths = dict.fromkeys(snap.mirrors, 0)
    t_bytes = dict.fromkeys(snap.mirrors, 0)
    t_secs = dict.fromkeys(snap.mirrors, 0.0)
    s_secs = dict.fromkeys(snap.mirrors, 0.0)
    for f in sorted(snap.fetchers, key=lambda f: (f.mirror, f.source_broker, f.fetcher_id)):
        if f.mirror not in mirrors:
            continue
        values = [f.mirror, str(f.source_broker), str(f.fetcher_id)]
        requests.add_metric(values, f.requests)
        errors.add_metric(values, f.errors)
        fetched.add_metric(values, f.response_bytes)
        appended.add_metric(values, f.appended_bytes)
        if f.alive is False:
            deaths[f.mirror] += 1
        t_bytes[f.mirror] += f.throttled_bytes
        t_secs[f.mirror] += f.throttled_seconds
        s_secs[f.mirror] += f.source_throttled_seconds
    for m in snap.mirrors:
        dead.add_metric([m], deaths[m])
        throttled.add_metric([m], t_bytes[m])
        waited.add_metric([m], t_secs[m])
        source_waited.add_metric([m], s_secs[m])
    rate.add_metric([], snap.throttle_rate)
    return [
        requests, errors, fetched, appended, dead, throttled, waited, source_waited, rate,
        *_network(snap),
    ]  # fmt: skip


# The KIP's per-fetcher client network metrics (mirror-broker-...-fetcher-...-metrics): name,
# help, counter or gauge, and how to read it from the fetcher's NetworkStats.
_NETWORK: tuple[tuple[str, str, bool, Callable[[NetworkStats], float]], ...] = (
    ("connection_count", "Open connections to the source broker", False,
     lambda n: n.connection_count),
    ("connection_creation", "Connections made to the source broker", True,
     lambda n: n.connections_created),
    ("connection_close", "Connections to the source broker closed", True,
     lambda n: n.connections_closed),
    ("incoming_byte", "Bytes received from the source broker", True, lambda n: n.bytes_received),
    ("outgoing_byte", "Bytes sent to the source broker", True, lambda n: n.bytes_sent),
    ("request", "Requests sent to the source broker", True, lambda n: n.requests_sent),
    ("response", "Responses received from the source broker", True,
     lambda n: n.responses_received),
    ("request_size_max", "Largest request sent to the source broker, bytes", False,
     lambda n: n.request_size_max),
    ("successful_authentication", "SASL authentications that succeeded", True,
     lambda n: n.auth_successes),
    ("failed_authentication", "SASL authentications that failed", True,
     lambda n: n.auth_failures),
)  # fmt: skip


def _network(snap: MirrorSnapshot) -> list[Any]:
    labels = ["mirror", "source_broker", "fetcher_id"]
    families = [
        (_counter if counter else _gauge)("fetcher_network_" + name, doc, labels)
        for name, doc, counter, _ in _NETWORK
    ]
    mirrors = set(snap.mirrors)
    for f in sorted(snap.fetchers, key=lambda f: (f.mirror, f.source_broker, f.fetcher_id)):
        if f.mirror not in mirrors:
            continue
        values = [f.mirror, str(f.source_broker), str(f.fetcher_id)]
        for family, (_, _, _, read) in zip(families, _NETWORK, strict=True):
            family.add_metric(values, read(f.network))
    return families


def _sync_families(snap: MirrorSnapshot) -> list[Any]:
    errors = _counter(
        "metadata_sync_errors", "Mirror metadata sync errors, per kind", ["mirror", "kind"]
    )
    skipped = _counter(
        "metadata_sync_skipped",
        "Metadata sync steps skipped because the source lacks the API, per kind",
        ["mirror", "kind"],
    )
    last = _gauge(
        "metadata_last_refresh_timestamp_seconds",
        "Wall-clock time the mirror's last metadata refresh finished",
        ["mirror"],
    )
    mirrors = set(snap.mirrors)
    counts = {(m, k): 0 for m in snap.mirrors for k in snap.sync_error_kinds}
    counts.update({k: n for k, n in snap.sync_errors.items() if k[0] in mirrors})
    for (m, kind), n in sorted(counts.items()):
        errors.add_metric([m, kind], n)
    for (m, kind), n in sorted(snap.sync_skipped.items()):
        if m in mirrors:
            skipped.add_metric([m, kind], n)
    for m, ms in sorted(snap.last_refresh_ms.items()):
        if m in mirrors:
            last.add_metric([m], ms / 1000)
    return [errors, skipped, last]
