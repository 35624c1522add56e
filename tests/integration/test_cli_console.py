"""bin/kafka-console-producer.sh and bin/kafka-console-consumer.sh as real processes against one
real node. What the producer writes is read back with a stock consumer (confluent-kafka) and
what stock producers write is printed by the console consumer, checked against Kafka 4.1's
DefaultMessageFormatter layout to the byte; groups commit what was printed (seen by a stock
client), read_committed stops at an open transaction, and bad input ends with Kafka's message.
"""

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .clients import create_topic
from .node import ROOT, Node

PRODUCER = str(ROOT / "bin" / "kafka-console-producer.sh")
CONSUMER = str(ROOT / "bin" / "kafka-console-consumer.sh")
TS = 1_700_000_000_000


def run(tool: str, *args: str, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:  # fmt: skip
    p = subprocess.run([tool, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def read_all(bootstrap: str, topic: str, n: int) -> list[Any]:
    """Every record of ``topic`` (``n`` expected) as a stock consumer reads them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        c.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m)
        return got
    finally:
        c.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(Path(tmp_path_factory.mktemp("console")) / "node1",
             transaction__state__log__replication__factor="1",
             transaction__state__log__min__isr="1")  # fmt: skip
    n.start()
    try:
        create_topic(n.bootstrap, "fmt", 2)
        p = Producer({"bootstrap.servers": n.bootstrap})
        p.produce("fmt", key=b"k0", value=b"v0", partition=0, timestamp=TS)
        p.produce("fmt", value=b"v1", partition=0, timestamp=TS + 1, headers=[("h", b"x"), ("e", None)])  # fmt: skip
        p.produce("fmt", key=b"k2", value=None, partition=1, timestamp=TS + 2)
        assert p.flush(20) == 0
        yield n
    finally:
        n.stop()


def test_producer_lines_keys_headers(node: Node) -> None:
    b = node.bootstrap
    lines = "a\tone\nb\ttwo\n"
    p = run(PRODUCER, "--bootstrap-server", b, "--topic", "prod-keys", "--property",
            "parse.key=true", stdin=lines)  # fmt: skip
    assert (p.returncode, p.stdout) == (0, ""), p
    p = run(PRODUCER, "--bootstrap-server", b, "--topic", "prod-keys", "--sync",
            "--property", "parse.key=true", "--property", "parse.headers=true",
            "--property", "null.marker=NULL", "--property", "key.separator=|",
            "--compression-codec", "--producer-property", "acks=1",
            stdin="h1:x,h2:NULL\tc|three\nNULL\tNULL|NULL\n")  # fmt: skip
    assert p.returncode == 0, p
    got = read_all(b, "prod-keys", 4)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [
        (b"a", b"one", None),
        (b"b", b"two", None),
        (b"c", b"three", [("h1", b"x"), ("h2", None)]),
        (None, None, None),
    ]


def test_producer_bad_line_keeps_what_was_read(node: Node) -> None:
    b = node.bootstrap
    p = run(PRODUCER, "--bootstrap-server", b, "--topic", "prod-bad", "--property",
            "parse.key=true", stdin="k\tgood\nno-separator\nk\tnever\n")  # fmt: skip
    assert p.returncode == 1
    assert p.stderr.strip().splitlines()[-1] == (
        "org.apache.kafka.common.KafkaException: No key separator found on line number 2: "
        "'no-separator'"
    )
    assert [m.value() for m in read_all(b, "prod-bad", 1)] == [b"good"]


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (["--bootstrap-server", "B"], 'Missing required argument "[topic]"'),
        (["--topic", "t"], "Error while validating the bootstrap address"),
        (["--topic", "t", "--bootstrap-server", "nohost"],
         "Please provide valid host:port like host1:9091,host2:9092"),
        (["--topic", "t", "--bootstrap-server", "B", "--bogus"], "bogus is not a recognized option"),
    ],
)  # fmt: skip
def test_producer_usage(node: Node, args: list[str], first_line: str) -> None:
    p = run(PRODUCER, *[node.bootstrap if a == "B" else a for a in args])
    assert p.returncode == 1 and p.stderr.splitlines()[0] == first_line, p
    assert "--request-required-acks" in p.stderr  # followed by the help


def test_consumer_default_formatter(node: Node) -> None:
    b = node.bootstrap
    p = run(CONSUMER, "--bootstrap-server", b, "--topic", "fmt", "--partition", "0",
            "--offset", "earliest", "--max-messages", "2")  # fmt: skip
    assert (p.returncode, p.stdout) == (0, "v0\nv1\n")
    assert p.stderr == "Processed a total of 2 messages\n"
    every = ["print.key", "print.timestamp", "print.partition", "print.offset", "print.headers"]
    props = [a for prop in every for a in ("--property", f"{prop}=true")]
    p = run(CONSUMER, "--bootstrap-server", b, "--topic", "fmt", "--from-beginning",
            "--max-messages", "3", *props)  # fmt: skip
    lines = sorted(p.stdout.splitlines())
    assert lines == [
        f"CreateTime:{TS}\tPartition:0\tOffset:0\tNO_HEADERS\tk0\tv0",
        f"CreateTime:{TS + 1}\tPartition:0\tOffset:1\th:x,e:null\tnull\tv1",
        f"CreateTime:{TS + 2}\tPartition:1\tOffset:0\tNO_HEADERS\tk2\tnull",
    ]
    p = run(CONSUMER, "--bootstrap-server", b, "--topic", "fmt", "--partition", "0",
            "--offset", "1", "--max-messages", "1", "--property", "print.value=false",
            "--property", "print.key=true", "--property", "null.literal=-",
            "--property", "line.separator=;")  # fmt: skip
    assert p.stdout == "-;"
    p = run(CONSUMER, "--bootstrap-server", b, "--topic", "fmt", "--partition", "0",
            "--offset", "earliest", "--max-messages", "2", "--formatter",
            "org.apache.kafka.tools.consumer.NoOpMessageFormatter")  # fmt: skip
    assert (p.returncode, p.stdout) == (0, "")
    p = run(CONSUMER, "--bootstrap-server", b, "--topic", "fmt", "--partition", "0",
            "--offset", "earliest", "--max-messages", "1", "--formatter",
            "org.apache.kafka.tools.consumer.LoggingMessageFormatter")  # fmt: skip
    assert p.stdout == "v0\n"
    assert f"INFO CreateTime:{TS}, key:k0, value:v0" in p.stderr


def test_consumer_timeout_and_include(node: Node) -> None:
    b = node.bootstrap
    started = time.monotonic()
    p = run(CONSUMER, "--bootstrap-server", b, "--include", "f.t", "--from-beginning",
            "--timeout-ms", "3000")  # fmt: skip
    assert p.returncode == 0
    assert sorted(p.stdout.splitlines()) == ["null", "v0", "v1"]
    err = p.stderr.splitlines()
    assert err[0].endswith(
        "ERROR Error processing message, terminating consumer process:  "
        "(org.apache.kafka.tools.consumer.ConsoleConsumer)"
    )
    assert err[1:] == [
        "org.apache.kafka.common.errors.TimeoutException",
        "Processed a total of 3 messages",
    ]
    assert time.monotonic() - started < 40


def test_consumer_group_commits_what_it_printed(node: Node) -> None:
    b = node.bootstrap
    p = run(CONSUMER, "--bootstrap-server", b, "--topic", "fmt", "--group", "cc-group",
            "--from-beginning", "--max-messages", "3")  # fmt: skip
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 3
    c = Consumer({"bootstrap.servers": b, "group.id": "cc-group"})
    try:
        committed = c.committed([TopicPartition("fmt", 0), TopicPartition("fmt", 1)], timeout=10)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [2, 1]
    # the group resumes there: nothing more to read
    p = run(CONSUMER, "--bootstrap-server", b, "--topic", "fmt", "--group", "cc-group",
            "--timeout-ms", "2000")  # fmt: skip
    assert p.stdout == "" and p.stderr.endswith("Processed a total of 0 messages\n")


def test_consumer_isolation_level(node: Node) -> None:
    """An open transaction: read_committed stops before it, read_uncommitted prints it."""
    b = node.bootstrap
    create_topic(b, "txn", 1)
    plain = Producer({"bootstrap.servers": b})
    plain.produce("txn", value=b"before")
    assert plain.flush(10) == 0
    tx = Producer({"bootstrap.servers": b, "transactional.id": "console-tx"})
    tx.init_transactions(20)
    tx.begin_transaction()
    tx.produce("txn", value=b"open")
    tx.flush(10)
    try:
        base = ["--bootstrap-server", b, "--topic", "txn", "--from-beginning",
                "--timeout-ms", "3000"]  # fmt: skip
        p = run(CONSUMER, *base, "--isolation-level", "read_committed")
        assert p.stdout == "before\n", p
        p = run(CONSUMER, *base)
        assert p.stdout == "before\nopen\n", p
    finally:
        tx.abort_transaction(10)


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (["--bootstrap-server", "B"], "Exactly one of --include/--topic is required. "),
        (["--bootstrap-server", "B", "--include", "x", "--partition", "0"],
         "The topic is required when partition is specified."),
        (["--bootstrap-server", "B", "--topic", "x", "--offset", "3"],
         "The partition is required when offset is specified."),
        (["--bootstrap-server", "B", "--topic", "x", "--partition", "0", "--offset", "3",
          "--from-beginning"], "Options from-beginning and offset cannot be specified together."),
        (["--bootstrap-server", "B", "--topic", "x", "--partition", "0", "--group", "g"],
         "Options group and partition cannot be specified together."),
        (["--bootstrap-server", "B", "--topic", "x", "--group", "g", "--consumer-property",
          "group.id=h"],
         "The group ids provided in different places (directly using '--group', via "
         "'--consumer-property', or via '--consumer.config') do not match. Detected group ids: "
         "'g', 'h'"),
        (["--bootstrap-server", "B", "--topic", "x", "--partition", "0", "--offset", "-4"],
         "The provided offset value '-4' is incorrect. Valid values are 'earliest', 'latest', "
         "or a non-negative long."),
        (["--bootstrap-server", "B", "--topic", "x", "--formatter", "com.example.Mine"],
         "com.example.Mine"),
        (["--topic", "x"], 'Missing required argument "[bootstrap-server]"'),
    ],
)  # fmt: skip
def test_consumer_usage(node: Node, args: list[str], first_line: str) -> None:
    p = run(CONSUMER, *[node.bootstrap if a == "B" else a for a in args])
    assert p.returncode == 1 and p.stderr.splitlines()[0] == first_line, p
    assert "--isolation-level" in p.stderr  # followed by the help


def test_consumer_conflicting_reset(node: Node) -> None:
    p = run(CONSUMER, "--bootstrap-server", node.bootstrap, "--topic", "fmt", "--from-beginning",
            "--consumer-property", "auto.offset.reset=latest")  # fmt: skip
    assert (p.returncode, p.stderr) == (
        1,
        "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please "
        "remove one option\n",
    )
