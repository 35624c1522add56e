"""bin/kafka-producer-perf-test.sh, bin/kafka-consumer-perf-test.sh and bin/kafka-server-stop.sh
as real processes against real nodes: the perf tools print Kafka 4.1's progress and summary
lines (checked against its format strings), the consumer warns as Kafka's does when records stop
coming, and kafka-server-stop.sh SIGTERMs only the node it is asked for (the other node of this
checkout keeps running), or says "No kafka server to stop" and exits 1.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .node import ROOT, Node

PRODUCER = str(ROOT / "bin" / "kafka-producer-perf-test.sh")
CONSUMER = str(ROOT / "bin" / "kafka-consumer-perf-test.sh")
STOP = str(ROOT / "bin" / "kafka-server-stop.sh")

pytestmark = pytest.mark.timeout(180)

WINDOW = re.compile(
    r"\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, "
    r"\d+\.\d ms max latency\."
)


def total(n: int) -> re.Pattern[str]:
    return re.compile(
        rf"{n} records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg "
        r"latency, \d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms "
        r"99\.9th\."
    )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("perf") / "n1", 1)
    n.start()
    try:
        yield n
    finally:
        n.stop()


def run(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_producer_then_consumer_perf(node: Node) -> None:
    p = run(
        PRODUCER, "--topic", "perf", "--num-records", "2000", "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={node.bootstrap}", "acks=all",
    )  # fmt: skip
    assert p.returncode == 0, p
    assert total(2000).fullmatch(p.stdout.splitlines()[-1]), p.stdout
    c = run(CONSUMER, "--bootstrap-server", node.bootstrap, "--topic", "perf", "--messages", "2000")
    assert c.returncode == 0, c
    header, values = c.stdout.splitlines()
    assert header == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
    rate = r"(-?\d+\.\d{4}|-?Infinity|NaN)"
    assert re.fullmatch(
        rf"{stamp}, {stamp}, 0\.1907, {rate}, 2000, {rate}, \d+, -?\d+, {rate}, {rate}", values
    ), c


def test_producer_prints_a_window_every_five_seconds(node: Node) -> None:
    p = run(
        PRODUCER, "--topic", "slow", "--num-records", "600", "--payload-monotonic",
        "--throughput", "100", "--bootstrap-server", node.bootstrap,
    )  # fmt: skip
    assert p.returncode == 0, p
    lines = p.stdout.splitlines()
    assert len(lines) >= 2 and all(WINDOW.fullmatch(ln) for ln in lines[:-1]), p.stdout
    assert total(600).fullmatch(lines[-1])


def test_consumer_warns_when_records_stop_coming(node: Node) -> None:
    c = run(
        CONSUMER, "--bootstrap-server", node.bootstrap, "--topic", "perf", "--messages", "5000",
        "--timeout", "1500", "--hide-header", "--group", "g-timeout",
    )  # fmt: skip
    assert c.returncode == 0, c
    warning, values = c.stdout.splitlines()
    assert warning == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (1500 ms) "
        "exceeded. You can use the --timeout option to increase the timeout."
    )
    assert ", 2000, " in values


def test_bad_perf_command_lines(node: Node) -> None:
    c = run(CONSUMER, "--bootstrap-server", node.bootstrap, "--messages", "5")
    assert c.returncode == 1 and c.stderr.startswith('Missing required argument "[topic]"\nOption')
    c = run(CONSUMER, "--topic", "x", "--messages", "5", "--bogus")
    assert (c.returncode, c.stderr) == (1, "bogus is not a recognized option\n")
    p = run(
        PRODUCER, "--topic", "x", "--num-records", "5", "--record-size", "1", "--throughput", "1"
    )
    assert p.returncode == 1 and p.stderr.endswith(
        "producer-performance: error: Either --producer-props or --producer.config must be "
        "specified.\n"
    )
    p = run(PRODUCER, "--topic", "x", "--num-records", "0", "--record-size", "1", "--throughput", "1",
            "--bootstrap-server", node.bootstrap)  # fmt: skip
    assert p.returncode == 1 and p.stderr.endswith(
        "producer-performance: error: --num-records should be greater than zero\n"
    )
    p = run(PRODUCER, "--topic", "x", "--num-records", "5", "--throughput", "1",
            "--bootstrap-server", node.bootstrap)  # fmt: skip
    assert p.returncode == 1 and "one of the arguments --record-size --payload-file " in p.stderr
    p = run(PRODUCER)
    assert p.returncode == 0 and p.stdout.startswith("usage: producer-performance")


def test_server_stop_signals_only_the_node_asked_for(node: Node, tmp_path: Path) -> None:
    other = Node(tmp_path / "n7", 7)
    other.start()
    try:
        none = run(STOP, "--node-id=8")
        assert (none.returncode, none.stdout) == (1, "No kafka server to stop\n")
        none = run(STOP, "--process-role=controller")  # both nodes are combined
        assert (none.returncode, none.stdout) == (1, "No kafka server to stop\n")
        bad = run(STOP, "--node-id=7", "--process-role=broker")
        assert bad.returncode == 1 and "Only one of" in bad.stderr
        done = run(STOP, "--node-id", "7")
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done
        assert other.proc is not None and other.proc.wait(30) == 0  # a clean shutdown
        assert node.proc is not None and node.proc.poll() is None  # node 1 untouched
    finally:
        other.kill()
