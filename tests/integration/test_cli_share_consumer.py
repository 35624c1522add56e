"""bin/kafka-console-share-consumer.sh as a real process against one real node with share groups
on, on records a stock producer (confluent-kafka) wrote: what it prints (with print.delivery),
and what its acknowledgements did, seen by the next reader of the group: ACCEPT (the default)
records are not delivered again, --release ones come back with delivery count 2, --reject ones
never; bad input gets Kafka's message.
"""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .clients import create_topic
from .node import ROOT, Node

TOOL = str(ROOT / "bin" / "kafka-console-share-consumer.sh")
TOPIC, N = "sq", 6


def run(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [TOOL, "--bootstrap-server", node.bootstrap, "--topic", TOPIC, *args],
        input="",
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(
        Path(tmp_path_factory.mktemp("share-console")) / "node1",
        group__share__enable="true",
        group__share__heartbeat__interval__ms="300",
        share__auto__offset__reset="earliest",
        share__coordinator__state__topic__num__partitions="3",
        share__coordinator__state__topic__replication__factor="1",
    )
    n.start()
    try:
        create_topic(n.bootstrap, TOPIC, 1)
        p = Producer({"bootstrap.servers": n.bootstrap})
        for i in range(N):
            p.produce(TOPIC, value=b"v%d" % i, key=b"k%d" % i)
        assert p.flush(20) == 0
        yield n
    finally:
        n.stop()


def test_accept_then_the_rest(node: Node) -> None:
    p = run(node, "--group", "g-acc", "--max-messages", "2", "--property", "print.delivery=true",
            "--property", "print.key=true", "--property", "print.offset=true")  # fmt: skip
    assert p.returncode == 0, p
    assert p.stdout == "Offset:0\tDelivery:1\tk0\tv0\nOffset:1\tDelivery:1\tk1\tv1\n"
    assert p.stderr.endswith("Processed a total of 2 messages\n")
    p = run(node, "--group", "g-acc", "--timeout-ms", "3000")
    assert p.stdout == "".join(f"v{i}\n" for i in range(2, N)), p
    assert p.stderr.splitlines()[-2:] == [
        "org.apache.kafka.common.errors.TimeoutException",
        f"Processed a total of {N - 2} messages",
    ]


def test_release_redelivers_and_reject_archives(node: Node) -> None:
    assert run(node, "--group", "g-rel", "--release", "--max-messages", "1").stdout == "v0\n"
    again = run(node, "--group", "g-rel", "--max-messages", "1", "--property",
                "print.delivery=true")  # fmt: skip
    assert again.stdout == "Delivery:2\tv0\n"
    assert run(node, "--group", "g-rej", "--reject", "--max-messages", "1").stdout == "v0\n"
    assert run(node, "--group", "g-rej", "--max-messages", "1").stdout == "v1\n"


def test_default_group(node: Node) -> None:
    assert run(node, "--max-messages", "1").stdout == "v0\n"
    listed = subprocess.run(
        [str(ROOT / "bin" / "kafka-share-groups.sh"), "--bootstrap-server", node.bootstrap,
         "--list"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "console-share-consumer" in listed.stdout.splitlines()


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (["--reject", "--release"], "At most one of --reject and --release may be specified."),
        (["--group", "a", "--consumer-property", "group.id=b"],
         "The group ids provided in different places (directly using '--group', via "
         "'--consumer-property', or via '--consumer-config') do not match. Detected group ids: "
         "'a', 'b'"),
        (["--formatter", "x.Y"], "x.Y"),
    ],
)  # fmt: skip
def test_bad_input(node: Node, args: list[str], first_line: str) -> None:
    p = run(node, *args)
    assert p.returncode == 1 and p.stderr.splitlines()[0] == first_line, p
    p = subprocess.run([TOOL, "--bootstrap-server", node.bootstrap], capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert p.returncode == 1 and p.stderr.splitlines()[0] == "--topic is a required argument"
