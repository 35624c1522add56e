"""bin/kafka-features.sh and bin/kafka-cluster.sh as real processes against a real three-node
cluster, and a fourth node (broker only) that joins the running cluster, takes a partition
through kafka-reassign-partitions.sh, and is decommissioned (reassigned away, stopped,
unregistered). Output lines are Kafka 4.1's FeatureCommand / ClusterTool format strings;
bad invocations get argparse4j's usage and error or Kafka's message, exit 1, no traceback.
share.version=1 turns share groups on, as Kafka 4.1 does: a confluent-kafka ShareConsumer
reads records only after the upgrade.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.metadata.features import FEATURES, MV_NAMES
from tests.waits import wait_for, wait_value

from .cluster import Cluster
from .node import ROOT, Node

FEATURES_TOOL = str(ROOT / "bin" / "kafka-features.sh")
CLUSTER_TOOL = str(ROOT / "bin" / "kafka-cluster.sh")
REASSIGN_TOOL = str(ROOT / "bin" / "kafka-reassign-partitions.sh")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("features"),
        broker__session__timeout__ms="4000",
        broker__heartbeat__interval__ms="500",
        share__auto__offset__reset="earliest",
        share__coordinator__state__topic__replication__factor="3",
        share__coordinator__state__topic__num__partitions="1",
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


def run(tool: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def features(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return run(FEATURES_TOOL, "--bootstrap-server", c.bootstrap, *args)


def describe_lines(c: Cluster) -> dict[str, str]:
    p = features(c, "describe")
    assert p.returncode == 0, p
    return {line.split("\t")[0]: line for line in p.stdout.splitlines()}


def test_describe_lists_every_supported_feature_in_kafkas_format(cluster: Cluster) -> None:
    lines = describe_lines(cluster)
    assert sorted(lines) == [f"Feature: {n}" for n in sorted(FEATURES)]
    epoch = re.search(r"\tEpoch: (\d+)$", lines["Feature: metadata.version"])
    assert epoch is not None
    assert lines["Feature: metadata.version"] == (
        "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.1-IV1\t"
        f"FinalizedVersionLevel: 4.1-IV1\tEpoch: {epoch.group(1)}"
    )
    assert lines["Feature: group.version"].startswith(
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
        "FinalizedVersionLevel: 1\tEpoch: "
    )
    assert "\tFinalizedVersionLevel: 0\t" in lines["Feature: transaction.version"]
    # through the controllers: the same features
    p = run(
        FEATURES_TOOL,
        "--bootstrap-controller",
        f"127.0.0.1:{cluster.node(2).controller_port}",
        "describe",
    )
    assert p.returncode == 0, p
    assert [ln.split("\t")[:4] for ln in p.stdout.splitlines()] == [
        ln.split("\t")[:4] for _, ln in sorted(lines.items())
    ]


def _share_consumer_reads(c: Cluster, topic: str, n: int, seconds: float) -> int:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {"bootstrap.servers": c.bootstrap, "group.id": f"sg-{topic}-{seconds}"}
    )
    got = 0
    try:
        consumer.subscribe([topic])
        import time

        deadline = time.monotonic() + seconds
        while got < n and time.monotonic() < deadline:
            for m in consumer.poll(0.5):
                if m is not None and m.error() is None:
                    got += 1
    finally:
        consumer.close()
    return got


def test_share_version_1_turns_share_groups_on(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("queue", 1, 3)])["queue"].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(5):
        p.produce("queue", f"v{i}".encode())
    assert p.flush(30) == 0
    assert _share_consumer_reads(cluster, "queue", 5, 4) == 0  # share groups are off

    dry = features(cluster, "upgrade", "--feature", "share.version=1", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, "share.version can be upgraded to 1.\n"), dry
    assert "FinalizedVersionLevel: 0\t" in describe_lines(cluster)["Feature: share.version"]
    done = features(cluster, "upgrade", "--feature", "share.version=1")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "share.version was upgraded to 1.\n",
        "",
    ), done
    assert "FinalizedVersionLevel: 1\t" in describe_lines(cluster)["Feature: share.version"]
    assert _share_consumer_reads(cluster, "queue", 5, 30) == 5

    off = features(cluster, "disable", "--feature", "share.version")
    assert (off.returncode, off.stdout) == (0, "share.version was disabled.\n"), off
    assert "FinalizedVersionLevel: 0\t" in describe_lines(cluster)["Feature: share.version"]


def test_every_controller_finds_the_active_one(cluster: Cluster) -> None:
    """--bootstrap-controller at each controller: the non-active ones answer DescribeCluster
    with the active controller, where the tool sends UpdateFeatures."""
    for n in cluster.nodes:
        p = run(
            FEATURES_TOOL,
            "--bootstrap-controller",
            f"127.0.0.1:{n.controller_port}",
            "upgrade",
            "--feature",
            "share.version=1",
            "--dry-run",
        )
        assert (p.returncode, p.stdout) == (0, "share.version can be upgraded to 1.\n"), p


def test_refused_updates_print_kafkas_lines(cluster: Cluster) -> None:
    p = features(cluster, "upgrade", "--feature", "transaction.version=2")
    assert p.returncode == 1
    assert re.fullmatch(
        r"Could not upgrade transaction\.version to 2\. The update failed for all features since "
        r"the following feature had an error: Invalid update version 2 for feature "
        r"transaction\.version\. Local controller [123] only supports versions 0-1\n",
        p.stdout,
    ), p.stdout
    assert p.stderr == "1 out of 1 operation(s) failed.\n"
    p = features(cluster, "upgrade", "--feature", "group.version=0")
    assert p.returncode == 1 and p.stdout.endswith(
        "Can't downgrade the version of this feature without setting the upgrade type to "
        "either safe or unsafe downgrade.\n"
    ), p
    p = features(cluster, "downgrade", "--feature", "group.version=0", "--dry-run")
    assert (p.returncode, p.stdout) == (0, "group.version can be downgraded to 0.\n"), p
    p = features(cluster, "downgrade", "--release-version", "3.9-IV0", "--dry-run")
    assert p.returncode == 1 and p.stdout.startswith(
        "Can not downgrade group.version to 0. The update failed for all features since the "
        "following feature had an error: Invalid metadata.version 21. Refusing to perform the "
        "requested downgrade because it might delete metadata information.\n"
    ), p
    assert p.stderr == "5 out of 5 operation(s) failed.\n"
    # metadata.version stays where it was
    assert (
        "FinalizedVersionLevel: 4.1-IV1\t" in describe_lines(cluster)["Feature: metadata.version"]
    )


def test_version_mapping_and_dependencies(cluster: Cluster) -> None:
    p = features(cluster, "version-mapping")
    assert p.stdout == (
        "metadata.version=27 (4.1-IV1)\nkraft.version=0\ntransaction.version=0\n"
        "group.version=1\nshare.version=0\n"
    ), p
    p = features(cluster, "version-mapping", "--release-version", "3.9-IV0")
    assert p.stdout.splitlines()[:4] == [
        "metadata.version=21 (3.9-IV0)",
        "kraft.version=0",
        "transaction.version=0",
        "group.version=0",
    ]
    p = features(cluster, "version-mapping", "--release-version", "2.8")
    assert (p.returncode, p.stdout, p.stderr) == (
        1,
        "",
        f"Unknown release version '2.8'. Supported versions are: 3.3-IV3 to {MV_NAMES[27]}\n",
    )
    p = features(cluster, "feature-dependencies", "--feature", "share.version=1")
    assert p.stdout == "share.version=1 requires:\n    metadata.version=27 (4.1-IV1)\n", p


def test_bad_command_lines(cluster: Cluster) -> None:
    p = run(FEATURES_TOOL, "describe")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith("usage: kafka-features ")
    assert p.stderr.endswith(
        "kafka-features: error: one of the arguments --bootstrap-server "
        "--bootstrap-controller is required\n"
    )
    for args, message in (
        (
            ["upgrade", "--feature", "share.version"],
            "Can't parse feature=level string share.version: equals sign not found.",
        ),
        (
            ["upgrade", "--feature", "share.version=x"],
            "Can't parse feature=level string share.version=x: unable to parse x as a short.",
        ),
        (["upgrade"], "You must specify at least one feature to upgrade"),
        (
            ["upgrade", "--feature", "a=1", "--feature", "a=2"],
            "Feature a was specified more than once.",
        ),
        (
            ["upgrade", "--release-version", "4.1-IV1", "--feature", "a=1"],
            "Can not specify `release-version` with other feature flags.",
        ),
    ):
        p = features(cluster, *args)
        assert (p.returncode, p.stdout, p.stderr) == (1, "", message + "\n"), args
    p = run(FEATURES_TOOL, "--bootstrap-server", "127.0.0.1:1", "describe")
    assert p.returncode == 1 and p.stdout == "" and "127.0.0.1:1" in p.stderr
    p = run(CLUSTER_TOOL, "unregister", "-b", cluster.bootstrap)
    assert p.returncode == 1
    assert p.stderr.endswith("kafka-cluster unregister: error: argument --id/-i is required\n")
    p = run(CLUSTER_TOOL, "cluster-id")
    assert (p.returncode, p.stderr) == (1, "Please specify --bootstrap-server.\n")


def test_cluster_id_and_unregistering_an_unknown_broker(cluster: Cluster) -> None:
    p = run(CLUSTER_TOOL, "cluster-id", "--bootstrap-server", cluster.bootstrap)
    assert (p.returncode, p.stdout) == (0, f"Cluster ID: {cluster.cluster_id}\n"), p
    p = run(CLUSTER_TOOL, "unregister", "-b", cluster.bootstrap, "--id", "9")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == (
        "org.apache.kafka.common.errors.BrokerIdNotRegisteredException: Broker ID 9 is not "
        "currently registered\n"
    )


def _broker_ids(c: Cluster) -> list[int]:
    md = AdminClient({"bootstrap.servers": c.node(1).bootstrap}).list_topics(timeout=10)
    return sorted(md.brokers)


def _reassign(c: Cluster, tmp: Path, replicas: list[int]) -> None:
    plan = tmp / f"plan-{'-'.join(map(str, replicas))}.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "moving", "partition": 0, "replicas": replicas}],
            }
        )
    )
    p = run(
        REASSIGN_TOOL,
        "--bootstrap-server",
        c.bootstrap,
        "--execute",
        "--reassignment-json-file",
        str(plan),
    )
    assert p.returncode == 0, p

    def done() -> bool:
        v = run(
            REASSIGN_TOOL,
            "--bootstrap-server",
            c.bootstrap,
            "--verify",
            "--reassignment-json-file",
            str(plan),
        )
        return "Reassignment of partition moving-0 is completed." in v.stdout

    wait_for(done, 60, what=f"moving-0 on {replicas}")


def test_a_new_broker_joins_takes_a_partition_and_is_decommissioned(
    cluster: Cluster, tmp_path: Path
) -> None:
    n1 = cluster.node(1)
    b4 = Node(tmp_path / "node4", 4)
    b4.cluster_id = cluster.cluster_id
    b4.settings = {
        "process.roles": "broker",
        "node.id": "4",
        "controller.quorum.voters": n1.settings["controller.quorum.voters"],
        "listeners": f"PLAINTEXT://127.0.0.1:{b4.port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b4.port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(b4.log_dir),
        "broker.heartbeat.interval.ms": "500",
        "metrics.port": "0",
    }
    try:
        b4.start(60)
        wait_for(lambda: _broker_ids(cluster) == [1, 2, 3, 4], 30, what="broker 4 registered")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("moving", num_partitions=1, replica_assignment=[[1, 2]])])[
            "moving"
        ].result(30)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(50):
            p.produce("moving", f"r{i}".encode(), partition=0)
        assert p.flush(30) == 0
        _reassign(cluster, tmp_path, [4, 2])
        state = wait_value(
            lambda: (s := cluster.partition_state("moving")) and sorted(s[2]) == [2, 4] and s,
            30,
            what="moving-0 in sync on 4 and 2",
        )
        assert sorted(state[1]) == [2, 4]
        assert (b4.log_dir / "moving-0").is_dir()

        # as in Kafka, a running broker that is unregistered registers again at once
        live = run(CLUSTER_TOOL, "unregister", "--bootstrap-server", cluster.bootstrap, "--id", "4")
        assert (live.returncode, live.stdout) == (0, "Broker 4 is no longer registered.\n")
        wait_for(
            lambda: b4.output.read_text().count("broker 4: registered with broker epoch") == 2,
            30,
            what="broker 4 registered again (its heartbeat got STALE_BROKER_EPOCH)",
        )
        wait_for(lambda: _broker_ids(cluster) == [1, 2, 3, 4], 30, what="broker 4 back")

        # decommission: move its partitions away, stop it, unregister it
        _reassign(cluster, tmp_path, [1, 2])
        assert b4.stop() == 0
        p2 = run(CLUSTER_TOOL, "unregister", "--bootstrap-server", cluster.bootstrap, "--id", "4")
        assert (p2.returncode, p2.stdout, p2.stderr) == (
            0,
            "Broker 4 is no longer registered.\n",
            "",
        ), p2
        wait_for(lambda: _broker_ids(cluster) == [1, 2, 3], 30, what="broker 4 gone")
        again = run(
            CLUSTER_TOOL, "unregister", "--bootstrap-server", cluster.bootstrap, "--id", "4"
        )
        assert again.returncode == 1 and "BrokerIdNotRegisteredException" in again.stderr
    finally:
        b4.kill()
