"""The KIP's per-fetcher client network metrics, from each fetcher's NetworkStats."""

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.metrics.mirror_metrics import FetcherRow, MirrorCollector, MirrorSnapshot
from broker.mirror.metrics_snapshot import STATES
from broker.network.stats import NetworkStats


def test_each_fetcher_reports_its_source_connections() -> None:
    net = NetworkStats(
        connections_created=3,
        connections_closed=2,
        bytes_sent=900,
        bytes_received=50_000,
        requests_sent=12,
        responses_received=11,
        request_size_max=120,
        auth_successes=3,
        auth_failures=1,
    )
    snap = MirrorSnapshot(
        mirrors=("m",),
        states=STATES,
        fetchers=(
            FetcherRow("m", 7, 1, True, network=net),
            FetcherRow("deleted", 7, 0, True, network=net),  # mirror gone: left out
        ),
    )
    registry = CollectorRegistry()
    registry.register(MirrorCollector(lambda: snap))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
        if s.name.startswith("kafka_server_mirror_fetcher_network_")
    }
    labels = (("fetcher_id", "1"), ("mirror", "m"), ("source_broker", "7"))
    p = "kafka_server_mirror_fetcher_network_"
    assert samples == {
        (p + "connection_count", labels): 1,
        (p + "connection_creation_total", labels): 3,
        (p + "connection_close_total", labels): 2,
        (p + "incoming_byte_total", labels): 50_000,
        (p + "outgoing_byte_total", labels): 900,
        (p + "request_total", labels): 12,
        (p + "response_total", labels): 11,
        (p + "request_size_max", labels): 120,
        (p + "successful_authentication_total", labels): 3,
        (p + "failed_authentication_total", labels): 1,
    }
