"""bin/kafka-topics.sh as a real process against real nodes: what it creates, alters and deletes
is checked with a stock admin client (confluent-kafka), and its output against Kafka 4.1's format
strings (TopicCommand) to the character: "Created topic X.", the describe lines with their tabs,
the report filters; bad invocations end with Kafka's message and exit code, never a traceback.
One three-node test covers --under-replicated-partitions and --unavailable-partitions.
"""

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from tests.waits import wait_for

from .cluster import Cluster
from .node import ROOT, Node

TOOL = str(ROOT / "bin" / "kafka-topics.sh")
NO_ELR = "\tElr: \tLastKnownElr: "


def run(bootstrap: str | None, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    boot = ["--bootstrap-server", bootstrap] if bootstrap else []
    p = subprocess.run(
        [TOOL, *boot, *args], input="", capture_output=True, text=True, timeout=timeout
    )
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def ok(bootstrap: str, *args: str) -> str:
    p = run(bootstrap, *args)
    assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def topic_ids(bootstrap: str, *names: str) -> dict[str, str]:
    """Each topic's id as Kafka prints it: URL-safe base64 (librdkafka prints the standard
    alphabet)."""
    a = AdminClient({"bootstrap.servers": bootstrap})
    futures = a.describe_topics(TopicCollection(list(names)))
    ids = {n: str(f.result(10).topic_id) for n, f in futures.items()}
    return {n: i.replace("+", "-").replace("/", "_") for n, i in ids.items()}


def partitions(bootstrap: str) -> dict[str, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {n: len(t.partitions) for n, t in md.topics.items()}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(Path(tmp_path_factory.mktemp("topics")) / "node1")
    n.start()
    try:
        yield n
    finally:
        n.stop()


def test_create_list_describe(node: Node) -> None:
    b = node.bootstrap
    assert ok(b, "--create", "--topic", "t-orders", "--partitions", "3") == (
        "Created topic t-orders.\n"
    )
    out = ok(b, "--create", "--topic", "t.dot", "--config", "retention.ms=60000",
             "--config", "cleanup.policy = compact")  # fmt: skip
    assert out == (
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
        "('_') could collide. To avoid issues it is best to use either, but not both.\n"
        "Created topic t.dot.\n"
    )
    assert partitions(b)["t-orders"] == 3
    listed = ok(b, "--list").splitlines()
    assert {"t-orders", "t.dot"} <= set(listed) and listed == sorted(listed)

    ids = topic_ids(b, "t-orders", "t.dot")
    out = ok(b, "--describe", "--topic", "t-orders")
    assert out == (
        f"Topic: t-orders\tTopicId: {ids['t-orders']}\tPartitionCount: 3\t"
        "ReplicationFactor: 1\tConfigs: \n"
        + "".join(
            f"\tTopic: t-orders\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1{NO_ELR}\n"
            for p in range(3)
        )
    )
    # DescribeTopicPartitions pages of one partition (its cursor) give the same description
    paged = ok(
        b, "--describe", "--topic", "t-orders|t.dot", "--partition-size-limit-per-response", "1"
    )
    assert paged.startswith(out) and paged.count("\tPartition: ") == 4
    first = ok(b, "--describe", "--topic", "t.dot").splitlines()[0]
    assert first.startswith(f"Topic: t.dot\tTopicId: {ids['t.dot']}\tPartitionCount: 1\t")
    configs = first.split("\tConfigs: ")[1].split(",")
    assert sorted(configs) == ["cleanup.policy=compact", "retention.ms=60000"]
    # by topic id; a regex (',' as '|'); --topics-with-overrides keeps topic lines only
    assert ok(b, "--describe", "--topic-id", ids["t.dot"]).splitlines()[0] == first
    described = ok(b, "--describe", "--topic", "t-orders,t\\.dot")
    assert [ln.split("\t")[0] for ln in described.splitlines() if ln.startswith("Topic")] == [
        "Topic: t-orders",
        "Topic: t.dot",
    ]
    overrides = ok(b, "--describe", "--topics-with-overrides").splitlines()
    assert first in overrides and not any("t-orders" in ln for ln in overrides)
    assert all(ln.startswith("Topic: ") for ln in overrides)


def test_create_refusals(node: Node) -> None:
    b = node.bootstrap
    ok(b, "--create", "--topic", "t-dup")
    p = run(b, "--create", "--topic", "t-dup")
    assert (p.returncode, p.stdout) == (
        1,
        "Error while executing topic command : Topic 't-dup' already exists.\n",
    )
    assert ok(b, "--create", "--topic", "t-dup", "--if-not-exists") == ""
    p = run(b, "--create", "--topic", "t-x", "--partitions", "0")
    assert (p.returncode, p.stderr) == (1, "The partitions must be greater than 0\n")
    p = run(b, "--create", "--topic", "t-x", "--replication-factor", "40000")
    assert p.returncode == 1
    assert p.stderr == "The replication factor must be between 1 and 32767 inclusive\n"
    p = run(b, "--create", "--topic", "t-x", "--replication-factor", "3")
    assert p.returncode == 1 and p.stdout.startswith("Error while executing topic command : ")
    p = run(b, "--create", "--topic", "t-x", "--config", "retention.ms")
    assert (p.returncode, p.stderr) == (
        1,
        "requirement failed: Invalid topic config: all configs to be added must be in the format "
        '"key=val".\n',
    )
    p = run(b, "--create", "--topic", "t-x", "--replica-assignment", "1:1")
    assert (p.returncode, p.stdout) == (
        1,
        "Error while executing topic command : Partition replica lists may not contain "
        "duplicate entries: 1\n",
    )
    assert "t-x" not in partitions(b)


def test_replica_assignment_alter_delete(node: Node) -> None:
    b = node.bootstrap
    assert ok(b, "--create", "--topic", "t-ra", "--replica-assignment", "1,1") == (
        "Created topic t-ra.\n"
    )
    assert partitions(b)["t-ra"] == 2
    assert ok(b, "--alter", "--topic", "t-ra", "--partitions", "4") == ""
    assert partitions(b)["t-ra"] == 4
    p = run(b, "--alter", "--topic", "t-ra", "--partitions", "2")
    assert p.returncode == 1
    assert p.stdout.startswith("Error while executing topic command : "), p
    p = run(b, "--alter", "--topic", "t-missing", "--partitions", "2")
    assert (p.returncode, p.stderr) == (1, "Topic 't-missing' does not exist as expected\n")
    assert ok(b, "--alter", "--topic", "t-missing", "--partitions", "2", "--if-exists") == ""

    assert ok(b, "--delete", "--topic", "t-ra") == ""
    wait_for(lambda: "t-ra" not in partitions(b), 15, "t-ra deleted")
    p = run(b, "--delete", "--topic", "t-ra")
    assert (p.returncode, p.stderr) == (1, "Topic 't-ra' does not exist as expected\n")
    assert ok(b, "--delete", "--topic", "t-ra", "--if-exists") == ""
    p = run(b, "--describe", "--topic", "t-ra")
    assert (p.returncode, p.stderr) == (1, "Topic 't-ra' does not exist as expected\n")


def test_min_isr_reports_and_internal_topics(node: Node) -> None:
    b = node.bootstrap
    ok(b, "--create", "--topic", "t-minisr", "--config", "min.insync.replicas=2")
    ok(b, "--create", "--topic", "t-atmin")
    under = ok(b, "--describe", "--under-min-isr-partitions")
    assert under == f"\tTopic: t-minisr\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1{NO_ELR}\n"
    at = ok(b, "--describe", "--at-min-isr-partitions", "--topic", "t-(atmin|minisr)")
    assert at == f"\tTopic: t-atmin\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1{NO_ELR}\n"
    assert ok(b, "--describe", "--under-replicated-partitions") == ""
    assert ok(b, "--describe", "--unavailable-partitions") == ""

    c = Consumer({"bootstrap.servers": b, "group.id": "topics-tool"})  # makes __consumer_offsets
    try:
        c.commit(offsets=[TopicPartition("t-atmin", 0, 0)], asynchronous=False)
    finally:
        c.close()
    assert "__consumer_offsets" in ok(b, "--list").splitlines()
    assert "__consumer_offsets" not in ok(b, "--list", "--exclude-internal").splitlines()
    described = ok(b, "--describe", "--exclude-internal")
    assert "__consumer_offsets" not in described and "t-atmin" in described


@pytest.mark.parametrize(
    ("args", "stream", "first_line"),
    [
        ([], "stderr", "Create, delete, describe, or change a topic."),
        (["--bootstrap-server", "B", "--list", "--bogus"], "stdout",
         "Error while executing topic command : bogus is not a recognized option"),
        (["--list"], "stderr", "--bootstrap-server must be specified"),
        (["--bootstrap-server", "B", "--create"], "stderr", 'Missing required argument "[topic]"'),
        (["--bootstrap-server", "B", "--list", "--create"], "stderr",
         "Command must include exactly one action: --list, --describe, --create, --alter or "
         "--delete"),
        (["--bootstrap-server", "B", "--list", "--partitions", "2"], "stderr",
         'Option "[partitions]" can\'t be used with option "[list]"'),
        (["--bootstrap-server", "B", "--alter", "--topic", "t"], "stderr",
         'Missing required argument "[partitions]"'),
        (["--bootstrap-server", "B", "--describe", "--under-replicated-partitions",
          "--topics-with-overrides"], "stderr",
         'Option "[under-replicated-partitions]" can\'t be used with option '
         '"[topics-with-overrides]"'),
        (["--bootstrap-server", "B", "--create", "--topic", "t", "--partitions", "x"], "stdout",
         "Error while executing topic command : Cannot parse argument 'x' of option partitions"),
        (["--bootstrap-server", "B", "--create", "--topic", "t", "--replica-assignment", "1",
          "--partitions", "2"], "stderr",
         'Option "[replica-assignment]" can\'t be used with option "[partitions]"'),
    ],
)  # fmt: skip
def test_bad_invocations(node: Node, args: list[str], stream: str, first_line: str) -> None:
    """Kafka's message and exit code 1; a usage error is followed by the help on stderr."""
    p = run(None, *[node.bootstrap if a == "B" else a for a in args])
    assert p.returncode == 1, p
    text = p.stdout if stream == "stdout" else p.stderr
    assert text.splitlines()[0] == first_line, (p.stdout, p.stderr)


def test_help_and_unreachable_cluster(node: Node, tmp_path: Path) -> None:
    p = run(None, "--help")
    assert p.returncode == 0 and "--under-min-isr-partitions" in p.stdout
    config = tmp_path / "client.properties"
    config.write_text("default.api.timeout.ms=1500\n")
    started = time.monotonic()
    p = run("127.0.0.1:1", "--list", "--command-config", str(config))
    assert (p.returncode, p.stdout) == (
        1,
        "Error while executing topic command : Timed out waiting for a node assignment. "
        "Call: listTopics\n",
    )
    assert time.monotonic() - started < 20
    p = run(node.bootstrap, "--list", "--command-config", str(tmp_path / "missing"))
    assert p.returncode == 1 and "missing" in p.stdout


def test_under_replicated_and_unavailable_on_three_nodes(tmp_path: Path) -> None:
    """Node 3 killed: the partition it shared becomes under-replicated (ISR 1,2), the one it
    held alone unavailable (Leader: none)."""
    c = Cluster(tmp_path, broker__session__timeout__ms="3000",
                broker__heartbeat__interval__ms="500").start()  # fmt: skip
    try:
        b = c.bootstrap
        ok(b, "--create", "--topic", "shared", "--replica-assignment", "1:2:3")
        ok(b, "--create", "--topic", "alone", "--replica-assignment", "3")
        wait_for(lambda: c.known_everywhere("alone"), 20, "topics on every node")
        assert ok(b, "--describe", "--under-replicated-partitions") == ""
        c.node(3).kill()
        b = ",".join(n.bootstrap for n in c.nodes[:2])

        def reports() -> tuple[str, str]:
            return (
                ok(b, "--describe", "--under-replicated-partitions"),
                ok(b, "--describe", "--unavailable-partitions"),
            )

        wait_for(lambda: all(reports()), 30, "node 3 out of the ISRs")
        under, unavailable = reports()
        lines = under.splitlines()
        assert "\tTopic: shared\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2" in "\n".join(
            lines
        ), under
        assert unavailable.startswith("\tTopic: alone\tPartition: 0\tLeader: none\tReplicas: 3\t")
    finally:
        c.stop()
