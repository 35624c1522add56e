"""The cluster counts each node reports from its metadata image (offline partitions among them),
and the gauge of logs that refuse appends after a failed write."""

import uuid

from prometheus_client import generate_latest

from broker.app.metrics_endpoint import cluster_counts
from broker.metadata.image import BrokerImage, MetadataImage, PartitionImage, TopicImage
from broker.metrics.broker_metrics import BrokerMetrics, StateSnapshot
from broker.metrics.cluster_metrics import ClusterCounts


def _topic(name: str, leaders: list[int]) -> TopicImage:
    parts = {
        i: PartitionImage(i, (1, 2, 3), (1, 2, 3) if lead >= 0 else (), lead, 1, 1)
        for i, lead in enumerate(leaders)
    }
    return TopicImage(name, uuid.uuid4(), parts)


def test_counts_partitions_without_a_leader_and_unfenced_brokers() -> None:
    image = MetadataImage(
        topics={"a": _topic("a", [1, -1, 2]), "b": _topic("b", [-1])},
        brokers={i: BrokerImage(i, 1, (), None, fenced=(i == 3)) for i in (1, 2, 3)},
    )
    assert cluster_counts(image) == ClusterCounts(
        topics=2, partitions=4, offline_partitions=2, active_brokers=2
    )
    assert cluster_counts(MetadataImage()) == ClusterCounts(0, 0, 0, 0)


def test_series_names() -> None:
    m = BrokerMetrics()
    m.watch_cluster(lambda: ClusterCounts(5, 12, 1, 3))
    m.watch_state(lambda: StateSnapshot([], 0, failed_logs=2))
    text = generate_latest(m.registry).decode()
    for line in (
        "kafka_controller_kafkacontroller_offlinepartitionscount 1.0",
        "kafka_controller_kafkacontroller_globalpartitioncount 12.0",
        "kafka_controller_kafkacontroller_globaltopiccount 5.0",
        "kafka_controller_kafkacontroller_activebrokercount 3.0",
        "kmirror_log_write_failed_partitions 2.0",
    ):
        assert line in text.splitlines(), line


def test_an_unreadable_image_leaves_the_series_out() -> None:
    m = BrokerMetrics()
    m.watch_cluster(lambda: None)
    assert "kafkacontroller" not in generate_latest(m.registry).decode()
