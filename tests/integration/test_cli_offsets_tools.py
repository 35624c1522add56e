"""bin/kafka-get-offsets.sh, bin/kafka-delete-records.sh and bin/kafka-log-dirs.sh as real
processes against one real node, on records a stock producer (confluent-kafka) wrote: output to
the character as Kafka 4.1's GetOffsetShell, DeleteRecordsCommand and LogDirsCommand print it
(including their orderings: "topic-partition" text order, Java's HashMap order), what they change
checked by a stock consumer, and bad input with Kafka's message and exit code.
"""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .clients import create_topic
from .node import ROOT, Node

BIN = ROOT / "bin"
TOPIC = "offs"  # 12 partitions: "offs-10" sorts before "offs-2"
PARTS, PER_PARTITION = 12, 5
BASE_TS = 1_700_000_000_000


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [str(BIN / tool), *args], input="", capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(Path(tmp_path_factory.mktemp("offsets")) / "node1")
    n.start()
    try:
        create_topic(n.bootstrap, TOPIC, PARTS)
        create_topic(n.bootstrap, "other", 1)
        p = Producer({"bootstrap.servers": n.bootstrap})
        for part in range(PARTS):
            for i in range(PER_PARTITION):
                p.produce(TOPIC, value=b"v", partition=part, timestamp=BASE_TS + 10 * i)
        assert p.flush(20) == 0
        yield n
    finally:
        n.stop()


def test_get_offsets(node: Node) -> None:
    b = node.bootstrap
    p = run("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic", TOPIC)
    order = sorted(range(PARTS), key=lambda i: f"{TOPIC}-{i}")
    assert p.returncode == 0 and p.stdout == "".join(
        f"{TOPIC}:{i}:{PER_PARTITION}\n" for i in order
    )
    p = run("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic-partitions",
            f"{TOPIC}:1-3,oth.*", "--time", "earliest")  # fmt: skip
    assert p.stdout == f"{TOPIC}:1:0\n{TOPIC}:2:0\nother:0:0\n"
    # the first offset whose timestamp is at or after --time
    p = run("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic", TOPIC,
            "--partitions", "0,3", "--time", str(BASE_TS + 25))  # fmt: skip
    assert p.stdout == f"{TOPIC}:0:3\n{TOPIC}:3:3\n"
    p = run("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic-partitions",
            f"{TOPIC}:4", "--time", "-3")  # fmt: skip
    assert p.stdout == f"{TOPIC}:4:{PER_PARTITION - 1}\n"
    # a time after every record: no offset, no line
    p = run("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic", TOPIC,
            "--time", str(BASE_TS + 10**6))  # fmt: skip
    assert (p.returncode, p.stdout) == (0, "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "nope"],
         "Error occurred: Could not match any topic-partitions with the specified filters"),
        (["--time", "yesterday"],
         "Error occurred: Malformed time argument yesterday. Please use -1 or latest / -2 or "
         "earliest / -3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a "
         "specified long format timestamp"),
        (["--topic", "x", "--topic-partitions", "x:1"],
         "Error occurred: --topic-partitions cannot be used with --topic or --partitions"),
        (["--partitions", "a,b"],
         "Error occurred: --partitions expects a comma separated list of numeric partition ids, "
         "but received: a,b"),
        (["--topic-partitions", "x:1-2-3"], "Error occurred: Invalid rule specification: x:1-2-3"),
        (["--nope"], "Error occurred: nope is not a recognized option"),
    ],
)  # fmt: skip
def test_get_offsets_bad_input(node: Node, args: list[str], message: str) -> None:
    p = run("kafka-get-offsets.sh", "--bootstrap-server", node.bootstrap, *args)
    assert (p.returncode, p.stdout, p.stderr) == (1, "", message + "\n")


def test_get_offsets_usage(node: Node) -> None:
    p = run("kafka-get-offsets.sh", "--topic", TOPIC)
    assert p.returncode == 1
    assert p.stderr.splitlines()[0] == 'Missing required argument "[bootstrap-server]"'
    assert "--topic-partitions" in p.stderr
    p = run("kafka-get-offsets.sh")
    assert p.returncode == 1
    assert p.stderr.startswith("An interactive shell for getting topic-partition offsets.\n")


def _earliest(b: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": b, "group.id": "probe"})
    try:
        low, _ = c.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)
        return int(low)
    finally:
        c.close()


def test_delete_records(node: Node, tmp_path: Path) -> None:
    b = node.bootstrap
    spec = {
        "partitions": [
            {"topic": TOPIC, "partition": 5, "offset": 2},
            {"topic": TOPIC, "partition": 6, "offset": -1},
            {"topic": TOPIC, "partition": 7, "offset": 99},
            {"topic": "missing", "partition": 0, "offset": 1},
        ],
        "version": 1,
    }
    f = tmp_path / "offsets.json"
    f.write_text(json.dumps(spec))
    p = run("kafka-delete-records.sh", "--bootstrap-server", b, "--offset-json-file", str(f))
    assert p.returncode == 0, p
    lines = p.stdout.splitlines()
    assert lines[:2] == [
        "Executing records delete operation",
        "Records delete operation completed:",
    ]
    # Java's HashMap order of the TopicPartitions
    assert lines[2:] == [
        f"partition: {TOPIC}-5\tlow_watermark: 2",
        "partition: missing-0\terror: org.apache.kafka.common.errors."
        "UnknownTopicOrPartitionException: This server does not host this topic-partition.",
        f"partition: {TOPIC}-7\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server.",
        f"partition: {TOPIC}-6\tlow_watermark: {PER_PARTITION}",
    ]
    assert (_earliest(b, 5), _earliest(b, 6), _earliest(b, 7)) == (2, PER_PARTITION, 0)
    got = run("kafka-get-offsets.sh", "--bootstrap-server", b, "--topic-partitions",
              f"{TOPIC}:5", "--time", "earliest")  # fmt: skip
    assert got.stdout == f"{TOPIC}:5:2\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "The input string is not a valid JSON"),
        ('{"version": 1}', "Missing partitions field"),
        ('{"version": 2, "partitions": []}', "Not supported version field value 2"),
        ('{"partitions": [{"topic": "a", "partition": 0, "offset": 1},'
         ' {"topic": "a", "partition": 0, "offset": 2}]}',
         "Offset json file contains duplicate topic partitions: a-0"),
    ],
)  # fmt: skip
def test_delete_records_bad_file(node: Node, tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "offsets.json"
    f.write_text(content)
    p = run("kafka-delete-records.sh", "--bootstrap-server", node.bootstrap,
            "--offset-json-file", str(f))  # fmt: skip
    assert p.returncode == 1 and p.stderr.splitlines()[0] == message, p
    assert "Records delete operation completed:" not in p.stdout


def test_delete_records_usage(node: Node, tmp_path: Path) -> None:
    p = run("kafka-delete-records.sh", "--bootstrap-server", node.bootstrap)
    assert p.returncode == 1
    assert p.stderr.splitlines()[0] == 'Missing required argument "[offset-json-file]"'
    missing = str(tmp_path / "none.json")
    p = run("kafka-delete-records.sh", "--bootstrap-server", node.bootstrap,
            "--offset-json-file", missing)  # fmt: skip
    assert (p.returncode, p.stderr) == (1, missing + "\n")


def test_log_dirs(node: Node) -> None:
    b = node.bootstrap
    p = run("kafka-log-dirs.sh", "--bootstrap-server", b, "--describe", "--topic-list", "other")
    assert p.returncode == 0, p
    head, received, doc = p.stdout.splitlines()
    assert head == "Querying brokers for log directories information"
    assert received == "Received log directory information from brokers 1"
    log_dir = str(node.log_dir)
    assert doc == (
        '{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"other-0","size":0,'
        '"offsetLag":0,"isFuture":false}],"error":null,"logDir":"' + log_dir + '"}]}],'
        '"version":1}'
    )
    p = run("kafka-log-dirs.sh", "--bootstrap-server", b, "--describe")
    replicas = json.loads(p.stdout.splitlines()[2])["brokers"][0]["logDirs"][0]["partitions"]
    sizes = {r["partition"]: r["size"] for r in replicas}
    assert {f"{TOPIC}-{i}" for i in range(PARTS)} <= set(sizes)
    assert sizes[f"{TOPIC}-0"] > 0


def test_log_dirs_bad_input(node: Node) -> None:
    b = node.bootstrap
    p = run("kafka-log-dirs.sh", "--bootstrap-server", b, "--describe", "--broker-list", "1,7")
    assert (p.returncode, p.stderr) == (
        1,
        "ERROR: The given brokers do not exist from --broker-list: 7. Current existent "
        "brokers: 1\n",
    )
    assert p.stdout == ""
    p = run("kafka-log-dirs.sh", "--bootstrap-server", b)
    assert p.returncode == 1
    assert p.stderr.splitlines()[0] == 'Missing required argument "[describe]"'
