"""bin/kafka-dump-log.sh --cluster-metadata-decoder on a real node's __cluster_metadata segment:
each record is printed as Kafka's DumpLogSegments prints it, `payload: {"type":...,"version":N,
"data":{...}}`, with the topic id a stock admin client reports."""

import json
import subprocess
from pathlib import Path
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from .clients import create_topic, wait_for
from .node import ROOT, Node


def _dump(segments: list[Path], *flags: str) -> str:
    p = subprocess.run(
        [str(ROOT / "bin" / "kafka-dump-log.sh"), *flags, "--files", ",".join(map(str, segments))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and not p.stderr, p.stderr
    return p.stdout


def test_metadata_segment_decoded(tmp_path: Path) -> None:
    node = Node(tmp_path / "n1")
    node.start()
    try:
        create_topic(node.bootstrap, "orders", 2, {"retention.ms": "3600000"})
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        (described,) = admin.describe_topics(TopicCollection(["orders"])).values()
        # librdkafka prints a Uuid in standard base64; Kafka's Uuid.toString is URL-safe
        topic_id = str(described.result(15).topic_id).replace("+", "-").replace("/", "_")
    finally:
        assert node.stop() == 0  # segments complete on disk
    segments = sorted((node.log_dir / "__cluster_metadata-0").glob("*.log"))
    assert segments

    out = _dump(segments, "--cluster-metadata-decoder")
    records: list[dict[str, Any]] = []
    for line in out.splitlines():
        if " payload: " in line:
            assert line.startswith("| offset: "), line
            records.append(json.loads(line.split(" payload: ", 1)[1]))
    assert records and all(set(r) == {"type", "version", "data"} for r in records)

    (topic,) = [r for r in records if r["type"] == "TOPIC_RECORD"]
    assert topic == {"type": "TOPIC_RECORD", "version": 0,
                     "data": {"name": "orders", "topicId": topic_id}}  # fmt: skip
    partitions = [r["data"] for r in records if r["type"] == "PARTITION_RECORD"]
    assert sorted(p["partitionId"] for p in partitions if p["topicId"] == topic_id) == [0, 1]
    for p in partitions:
        assert p["leader"] == node.node_id and p["replicas"] == [node.node_id], p
        assert "leaderRecoveryState" not in p  # a tagged field at its default is left out
    configs = [r["data"] for r in records if r["type"] == "CONFIG_RECORD"]
    assert {"resourceType": 2, "resourceName": "orders", "name": "retention.ms",
            "value": "3600000"} in configs  # fmt: skip
    assert any(r["type"] == "FEATURE_LEVEL_RECORD" for r in records)
    assert "controlType: LEADER_CHANGE(2)" in out

    raw = _dump(segments, "--print-data-log")  # without the decoder: the bytes, as Kafka
    assert '"TOPIC_RECORD"' not in raw


def test_metadata_snapshot_decoded(tmp_path: Path) -> None:
    """A ``.checkpoint`` holds one metadata record per record, as Kafka writes snapshots, so the
    same decoder prints the image it holds."""
    node = Node(
        tmp_path / "n1",
        metadata__log__max__record__bytes__between__snapshots="2000",
        metadata__log__max__snapshot__interval__ms="500",
    )
    node.start()
    try:
        for i in range(12):
            create_topic(node.bootstrap, f"snap-{i}", 2)
        snapshot_dir = node.log_dir / "__cluster_metadata-0"
        wait_for(lambda: any(snapshot_dir.glob("*.checkpoint")), 30, "a metadata snapshot")
    finally:
        assert node.stop() == 0
    (latest,) = sorted(snapshot_dir.glob("*.checkpoint"))[-1:]
    out = _dump([latest], "--cluster-metadata-decoder")
    records = [
        json.loads(line.split(" payload: ", 1)[1])
        for line in out.splitlines()
        if " payload: " in line
    ]
    names = {r["data"]["name"] for r in records if r["type"] == "TOPIC_RECORD"}
    assert {f"snap-{i}" for i in range(6)} <= names, out[-2000:]
    assert any(r["type"] == "REGISTER_BROKER_RECORD" for r in records)
