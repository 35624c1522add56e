"""Process behaviour of a real node: signals, start-up refusals, the wrapper scripts, metrics."""

import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .clients import create_topic, wait_for
from .node import ROOT, Node, free_port

START_TIMEOUT = 30.0


def _run_broker(config: Path, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run the node in the foreground; for configs that must be refused before it listens."""
    return subprocess.run(
        [sys.executable, "-m", "broker", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _append_line(node: Node, line: str) -> None:
    with node.config_path.open("a") as f:
        f.write(line + "\n")


def _create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=10).values():
        fut.result(15)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors: list[object] = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda e, m: errors.append(e) if e else None)
        p.poll(0)
    assert p.flush(15) == 0, "produce did not complete"
    assert errors == []


# -- signals ------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shuts_down_cleanly_and_restarts(tmp_path: Path, sig: signal.Signals) -> None:
    node = Node(tmp_path / "n")
    try:
        node.start(START_TIMEOUT)
        _create_topic(node.bootstrap, "sig-topic")
        assert node.proc is not None
        t0 = time.monotonic()
        node.proc.send_signal(sig)
        rc = node.proc.wait(10)
        took = time.monotonic() - t0
        assert rc == 0, f"exit code {rc} after {sig.name}:\n{node.log_tail()}"
        assert took < 5.0, f"shutdown after {sig.name} took {took:.1f}s"
        assert "Traceback" not in node.output.read_text(errors="replace")
        assert (node.log_dir / ".kafka_cleanshutdown").exists()
        # A second start on the same directories works and still knows the topic.
        node.start(START_TIMEOUT)
        md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10)
        assert "sig-topic" in md.topics
        assert node.stop() == 0
    finally:
        node.kill()


# -- refusals -----------------------------------------------------------------------------


def test_unknown_config_key_refuses_to_start(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    node.format()
    _append_line(node, "log.retention.hour=5")
    res = _run_broker(node.config_path)
    assert res.returncode == 1, res
    assert "log.retention.hour" in res.stderr, res.stderr
    assert "unknown" in res.stderr.lower(), res.stderr


def test_bad_config_value_refuses_to_start(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    node.format()
    node.settings["num.partitions"] = "abc"
    node.write_config()
    res = _run_broker(node.config_path)
    assert res.returncode == 1, res
    assert "num.partitions" in res.stderr and "abc" in res.stderr, res.stderr


def test_unimplemented_kafka_key_starts_with_one_warning(tmp_path: Path) -> None:
    node = Node(tmp_path / "n", background__threads="7")
    try:
        node.start(START_TIMEOUT)
        assert node.stop() == 0
    finally:
        node.kill()
    lines = node.output.read_text(errors="replace").splitlines()
    warnings = [ln for ln in lines if "WARNING" in ln or " WARN " in ln]
    assert len(warnings) == 1, warnings
    assert "background.threads" in warnings[0], warnings


def test_unformatted_log_dir_refuses_to_start(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    node.write_config()  # no format
    res = _run_broker(node.config_path)
    assert res.returncode == 1, res
    assert str(node.log_dir) in res.stderr, res.stderr
    assert "not formatted" in res.stderr and "kafka-storage" in res.stderr, res.stderr


# -- wrapper scripts ------------------------------------------------------------------------


def test_server_start_script_wraps_the_node(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    node.format()
    with node.output.open("ab") as out:
        proc = subprocess.Popen(
            [str(ROOT / "bin" / "kafka-server-start.sh"), str(node.config_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        answers: list[Any] = []

        def answered() -> bool:
            assert proc.poll() is None, node.log_tail()
            try:
                answers.append(
                    AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=1)
                )
            except Exception:
                return False
            return True

        wait_for(answered, START_TIMEOUT, "the node to answer", step=0.2, detail=node.log_tail)
        assert 1 in answers[0].brokers, node.log_tail()
        proc.send_signal(signal.SIGTERM)  # the script execs python: the signal reaches the node
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- one shared node for the read-only checks ----------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    node = Node(tmp_path_factory.mktemp("process") / "n")
    node.start(START_TIMEOUT)
    yield node
    node.kill()


def test_dump_log_prints_batches_of_a_produced_segment(shared: Node) -> None:
    _create_topic(shared.bootstrap, "dump-topic")
    _produce(shared.bootstrap, "dump-topic", 5)
    seg = shared.log_dir / "dump-topic-0" / "00000000000000000000.log"
    res = subprocess.run(
        [str(ROOT / "bin" / "kafka-dump-log.sh"), "--files", str(seg)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    assert f"Dumping {seg}" in res.stdout, res.stdout
    base_offsets = [int(m) for m in re.findall(r"baseOffset: (\d+)", res.stdout)]
    assert base_offsets and base_offsets[0] == 0, res.stdout
    last = [int(m) for m in re.findall(r"lastOffset: (\d+)", res.stdout)]
    assert max(last) == 4, res.stdout


def _scrape(node: Node) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample, by metric name and (a subset of) its labels."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{([^}]*)\})? (\S+)$", line)
        if m is None or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    raise AssertionError(f"no sample {name}{labels} in metrics:\n{text[:3000]}")


def test_metrics_after_produce_and_consume(shared: Node) -> None:
    topic = "metrics-topic"
    _create_topic(shared.bootstrap, topic, partitions=2)
    _produce(shared.bootstrap, topic, 20)
    c = Consumer(
        {
            "bootstrap.servers": shared.bootstrap,
            "group.id": "metrics-g",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 20
        while got < 20 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == 20
    finally:
        c.close()
    text = _scrape(shared)
    for api in ("Produce", "Fetch", "Metadata", "ApiVersions", "CreateTopics"):
        assert _sample(text, "kafka_network_request_requests_total", request=api) >= 1, api
    produce_count = _sample(
        text, "kafka_network_request_total_time_seconds_count", request="Produce"
    )
    assert produce_count >= 1
    assert (
        _sample(
            text, "kafka_network_request_total_time_seconds_bucket", request="Produce", le="+Inf"
        )
        == produce_count
    )
    assert _sample(text, "kafka_network_request_total_time_seconds_sum", request="Produce") > 0
    # 20 records of 2-3 bytes each, in batches of >= 61 bytes of overhead.
    assert (
        _sample(text, "kafka_server_brokertopicmetrics_bytes_in_total", topic=topic) >= 20 * 2 + 61
    )
    assert _sample(text, "kafka_server_brokertopicmetrics_bytes_out_total") > 0
    # dump-topic and the offsets topic partitions may be there too: at least this topic's 2.
    assert _sample(text, "kafka_server_replicamanager_partitioncount") >= 2
    sizes = [_sample(text, "kafka_log_log_size", topic=topic, partition=str(p)) for p in (0, 1)]
    assert sum(sizes) >= 20 * 2 + 61, sizes
    ends = [
        _sample(text, "kafka_log_log_logendoffset", topic=topic, partition=str(p)) for p in (0, 1)
    ]
    assert sum(ends) == 20, ends
    # The scrape reflects the disk: a partition's size is its segment files' size.
    on_disk = sum(f.stat().st_size for f in (shared.log_dir / f"{topic}-0").glob("*.log"))
    assert sizes[0] == on_disk


def test_standalone_quorum_from_bootstrap_servers(tmp_path: Path) -> None:
    """Kafka 4's stock server.properties names only controller.quorum.bootstrap.servers (a
    standalone dynamic quorum): the node is its quorum's one voter. With KIP-853 the bootstrap
    servers may name controllers that are not there yet (they join with add-controller): the
    voters are those ``format --standalone`` wrote, so the node still leads alone."""
    for name, extra in (("n", ""), ("m", f",127.0.0.1:{free_port()}")):
        node = Node(tmp_path / name)
        del node.settings["controller.quorum.voters"]
        node.settings["controller.quorum.bootstrap.servers"] = (
            f"127.0.0.1:{node.controller_port}{extra}"
        )
        node.format("--standalone")
        try:
            node.start(START_TIMEOUT)
            create_topic(node.bootstrap, "standalone", 1)
            assert node.stop() == 0
        finally:
            node.kill()
