"""Per-group dynamic configs (resource type GROUP) against one real node: confluent-kafka's
AdminClient sets and describes them (IncrementalAlterConfigs / DescribeConfigs), bad names and
values are INVALID_CONFIG, bin/kafka-configs.sh --entity-type groups shows and changes them, a
restart keeps them (ConfigRecords in the metadata log), and a share group's own
share.auto.offset.reset decides where a ShareConsumer starts (the node's default is latest)."""

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from .clients import create_topic, wait_for
from .node import ROOT, Node

CONFIGS = str(ROOT / "bin" / "kafka-configs.sh")
NODE = {
    "group__share__enable": "true",
    "share__coordinator__state__topic__num__partitions": "1",
    "share__coordinator__state__topic__replication__factor": "1",
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(Path(tmp_path_factory.mktemp("gcfg")) / "node1", **NODE)
    n.start()
    try:
        yield n
    finally:
        n.kill()


def _admin(node: Node) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def _alter(node: Node, group: str, **configs: str) -> None:
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()
    ]
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = _admin(node)  # kept alive until the answer is in
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=20)


def _describe(node: Node, group: str) -> dict[str, tuple[str, ConfigSource]]:
    res = ConfigResource(ResourceType.GROUP, group)
    admin = _admin(node)
    (f,) = admin.describe_configs([res]).values()
    return {k: (e.value, ConfigSource(e.source)) for k, e in f.result(timeout=20).items()}


def test_admin_client_sets_and_describes(node: Node) -> None:
    _alter(node, "g1", share_record_lock_duration_ms="20000", consumer_session_timeout_ms="50000")
    seen = _describe(node, "g1")
    assert seen["share.record.lock.duration.ms"] == ("20000", ConfigSource.GROUP_CONFIG)
    assert seen["consumer.session.timeout.ms"] == ("50000", ConfigSource.GROUP_CONFIG)
    # the rest: the broker's values
    assert seen["share.auto.offset.reset"] == ("latest", ConfigSource.DEFAULT_CONFIG)
    assert seen["share.heartbeat.interval.ms"] == ("5000", ConfigSource.DEFAULT_CONFIG)
    assert set(seen) == {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
    }


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("group.bogus", "1", "Unknown group config name: group.bogus"),
        ("consumer.session.timeout.ms", "1000", "group.consumer.min.session.timeout.ms"),
        ("share.record.lock.duration.ms", "999", "at least 1000"),
        ("share.auto.offset.reset", "middle", "share.auto.offset.reset"),
    ],
)
def test_bad_configs_are_invalid_config(node: Node, key: str, value: str, message: str) -> None:
    with pytest.raises(KafkaException) as exc:
        _alter(node, "g2", **{key.replace(".", "_"): value})
    err = exc.value.args[0]
    assert err.name() == "INVALID_CONFIG" and message in err.str()


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CONFIGS, *args], capture_output=True, text=True, timeout=60)


def test_kafka_configs_tool_and_restart(node: Node) -> None:
    boot = ["--bootstrap-server", node.bootstrap]
    p = _tool(*boot, "--alter", "--group", "g3", "--add-config", "share.auto.offset.reset=earliest")
    assert p.returncode == 0 and p.stdout == "Completed updating config for group g3.\n", p.stderr
    describe = [*boot, "--describe", "--entity-type", "groups", "--entity-name", "g3"]
    expected = (
        "Dynamic configs for group g3 are:\n"
        "  share.auto.offset.reset=earliest sensitive=false "
        "synonyms={GROUP_CONFIG:share.auto.offset.reset=earliest}\n"
    )
    assert _tool(*describe).stdout == expected
    p = _tool(*boot, "--alter", "--group", "g3", "--add-config", "share.session.timeout.ms=1")
    assert p.returncode == 1 and "INVALID_CONFIG" in p.stderr + p.stdout
    assert "group.share.min.session.timeout.ms" in p.stderr + p.stdout
    # ConfigRecords in the metadata log: a restarted node still has them
    node.stop()
    node.start()
    wait_for(lambda: _tool(*describe).returncode == 0, 30, "the restarted node answering", 0.5)
    p = _tool(*describe)
    assert p.stdout == expected, p.stderr
    p = _tool(*boot, "--alter", "--group", "g3", "--delete-config", "share.auto.offset.reset")
    assert p.returncode == 0
    assert _tool(*describe).stdout == "Dynamic configs for group g3 are:\n"


def test_share_group_starts_where_its_own_reset_says(node: Node) -> None:
    """The node's share.auto.offset.reset is latest: only the group's earliest override makes
    a new ShareConsumer see records produced before it joined."""
    create_topic(node.bootstrap, "early-bird", 1)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(5):
        producer.produce("early-bird", value=b"e%d" % i)
    assert producer.flush(20) == 0
    _alter(node, "sg-early", share_auto_offset_reset="earliest")
    c = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": "sg-early"})
    c.subscribe(["early-bird"])
    try:
        got: set[int] = set()
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got |= {m.offset() for m in c.poll(0.2) if m is not None and m.error() is None}
        assert sorted(got) == list(range(5))
    finally:
        c.close()


def test_describe_every_group(node: Node) -> None:
    """Without --entity-name: every group ListGroups reports, each with its own configs."""
    p = _tool("--bootstrap-server", node.bootstrap, "--describe", "--entity-type", "groups")
    assert p.returncode == 0, p.stderr
    assert (
        "Dynamic configs for group sg-early are:\n"
        "  share.auto.offset.reset=earliest sensitive=false "
        "synonyms={GROUP_CONFIG:share.auto.offset.reset=earliest}\n"
    ) in p.stdout
