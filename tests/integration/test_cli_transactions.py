"""bin/kafka-transactions.sh and bin/kafka-broker-api-versions.sh as real processes against one
real node, on a transaction left open by confluent-kafka's transactional producer. Tables are
Kafka 4.1's (ToolsUtils.prettyPrintTable: each value padded to its column's widest, then a tab);
abort --start-offset writes the ABORT marker (describe-producers then shows no open
transaction); bad invocations get Kafka's messages and exit 1, never a traceback.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .node import ROOT, Node

TXN_TOOL = str(ROOT / "bin" / "kafka-transactions.sh")
VERSIONS_TOOL = str(ROOT / "bin" / "kafka-broker-api-versions.sh")
TOPIC = "txt"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(
        tmp_path_factory.mktemp("txn") / "n1",
        1,
        transaction__state__log__replication__factor="1",
        transaction__state__log__min__isr="1",
        transaction__state__log__num__partitions="2",
    )
    n.start()
    try:
        admin = AdminClient({"bootstrap.servers": n.bootstrap})  # alive until the result
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        yield n
    finally:
        n.stop()


@pytest.fixture(scope="module")
def open_txn(node: Node) -> Iterator[Producer]:
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "tx-open"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    yield p


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def txn(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return run(TXN_TOOL, "--bootstrap-server", node.bootstrap, *args)


def kafka_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """prettyPrintTable's layout, spelled out for the expected text."""
    widths = [max(len(r[i]) for r in (headers, *rows)) for i in range(len(headers))]
    return "".join(
        "".join(v + " " * (w - len(v)) + "\t" for v, w in zip(r, widths, strict=True)) + "\n"
        for r in (headers, *rows)
    )


def _producer_row(node: Node) -> list[str]:
    p = txn(node, "describe-producers", "--topic", TOPIC, "--partition", "0")
    assert p.returncode == 0, p
    lines = p.stdout.splitlines()
    assert len(lines) == 2, p.stdout
    return [c.strip() for c in lines[1].split("\t")[:-1]]


def test_list_describe_and_describe_producers(node: Node, open_txn: Producer) -> None:
    pid, epoch, coord_epoch, last_seq, last_ts, start = _producer_row(node)
    assert (start, last_seq) == ("0", "2")
    p = txn(node, "describe-producers", "--topic", TOPIC, "--partition", "0")
    assert p.stdout == kafka_table(
        (
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ),
        [(pid, epoch, coord_epoch, last_seq, last_ts, start)],
    )
    p = txn(node, "list")
    assert p.returncode == 0, p
    assert p.stdout == kafka_table(
        ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
        [("tx-open", "1", pid, "Ongoing")],
    )
    p = txn(node, "describe", "--transactional-id", "tx-open")
    assert p.returncode == 0, p
    header, row = p.stdout.splitlines()
    cells = [c.strip() for c in row.split("\t")[:-1]]
    assert cells[:6] == ["1", "tx-open", pid, epoch, "Ongoing", "60000"]
    assert re.fullmatch(r"\d{13}", cells[6]) and int(cells[7]) >= 0 and cells[8] == "txt-0"
    assert header.split("\t")[:-1] == [
        h.ljust(len(c))
        for h, c in zip(
            (
                "CoordinatorId",
                "TransactionalId",
                "ProducerId",
                "ProducerEpoch",
                "TransactionState",
                "TransactionTimeoutMs",
                "CurrentTransactionStartTimeMs",
                "TransactionDurationMs",
                "TopicPartitions",
            ),
            row.split("\t")[:-1],
            strict=True,
        )
    ]
    # open, but its coordinator holds the partition: not hanging
    p = txn(node, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
    assert p.returncode == 0 and p.stdout == (
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
        "LastTimestamp\tDuration(min)\t\n"
    ), p
    p = txn(node, "find-hanging", "--broker-id", "1")
    assert p.returncode == 0 and p.stdout.startswith("Topic\tPartition\t"), p


def test_abort_by_start_offset_closes_the_open_transaction(
    node: Node, open_txn: Producer, tmp_path: Path
) -> None:
    p = txn(node, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "7")
    assert (p.returncode, p.stderr) == (
        1,
        "Could not find any open transactions starting at offset 7 on partition txt-0\n",
    )
    p = txn(node, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "0")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), p
    assert _producer_row(node)[5] == "None"


def test_bad_input(node: Node) -> None:
    p = txn(node, "describe", "--transactional-id", "nope")
    assert (p.returncode, p.stderr) == (
        1,
        "Failed to describe transaction state of transactional-id `nope`: The transactionalId "
        "could not be found.. Enable debug logging for additional detail.\n",
    )
    p = txn(node, "abort", "--topic", TOPIC, "--partition", "0")
    assert p.returncode == 1 and p.stderr.startswith(
        "The transaction to abort must be identified either with --start-offset"
    )
    p = txn(node, "abort", "--topic", TOPIC, "--partition", "0", "--producer-id", "5")
    assert (p.returncode, p.stderr) == (1, "Missing required argument --producer-epoch\n")
    p = txn(node, "find-hanging")
    assert (p.returncode, p.stderr) == (
        1,
        "The `find-hanging` command requires either --topic or --broker-id to limit the scope "
        "of the search\n",
    )
    p = txn(node, "find-hanging", "--partition", "0", "--broker-id", "1")
    assert (p.returncode, p.stderr) == (
        1,
        "The --partition argument requires --topic to be provided\n",
    )
    p = txn(node, "describe-producers", "--topic", TOPIC, "--partition", "x")
    assert p.returncode == 1 and p.stderr.endswith(
        "kafka-transactions.sh describe-producers: error: argument --partition: could not "
        "convert 'x' to Integer (For input string: \"x\")\n"
    )
    p = run(TXN_TOOL, "list")
    assert p.returncode == 1 and p.stderr.endswith(
        "kafka-transactions.sh: error: argument --bootstrap-server is required\n"
    )
    p = run(TXN_TOOL, "--bootstrap-server", "127.0.0.1:1", "list")
    assert p.returncode == 1 and "127.0.0.1:1" in p.stderr


def test_broker_api_versions(node: Node) -> None:
    p = run(VERSIONS_TOOL, "--bootstrap-server", node.bootstrap)
    assert p.returncode == 0, p
    lines = p.stdout.splitlines()
    assert lines[0] == f"127.0.0.1:{node.port} (id: 1 rack: null isFenced: false) -> ("
    assert lines[1] == "\tProduce(0): 0 to 13 [usable: 13],"
    assert "\tApiVersions(18): 0 to 4 [usable: 4]," in lines
    assert "\tUpdateFeatures(57): 0 to 2 [usable: 2]," in lines
    assert "\tUnregisterBroker(64): 0 [usable: 0]," in lines
    assert "\tStreamsGroupHeartbeat(88): UNSUPPORTED," in lines
    assert "\tCreateMirror(94): 0" not in p.stdout and "\tUNKNOWN(94): 0," in lines
    assert lines[-1] == ")" and not lines[-2].endswith(",")
    keys = [int(m.group(1)) for ln in lines[1:-1] if (m := re.search(r"\((\d+)\): ", ln))]
    assert keys == sorted(keys)
    p = run(VERSIONS_TOOL)
    assert p.returncode == 1 and p.stderr.startswith(
        "This tool helps to retrieve broker version information.\nOption"
    )
    p = run(VERSIONS_TOOL, "--bootstrap-server")
    assert (p.returncode, p.stderr) == (1, "Option [bootstrap-server] requires an argument\n")
    p = run(VERSIONS_TOOL, "--bootstrap-servers", "x:1")
    assert (p.returncode, p.stderr) == (1, "bootstrap-servers is not a recognized option\n")
