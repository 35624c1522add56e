"""The main job: a source and a destination node on this machine, mirrored, then failed over.

``bin/quickstart.sh`` runs this: it formats and starts two nodes on free loopback ports under
``$KMIRROR_QUICKSTART_DIR`` (default: a new temporary directory), produces to the source with a
stock idempotent lz4 producer, creates a mirror with kafka-mirrors.sh semantics (create, add,
describe), shows that both sides hold the same topic id and byte-identical record batches, reads
the mirror topic on the destination with a stock consumer, fails over (remove) and produces to the
destination. At the end, on an error, on SIGTERM or on SIGINT it stops the nodes it started
(SIGTERM, by PID); with ``--keep`` it leaves them running instead and prints their PIDs and the
command that stops them, so they are never left behind unsaid.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Two clusters, two ids: a mirror refuses a source whose cluster id is its own.
CLUSTER_IDS = {"source": "RjB46kGQQMy-Ec7V6fz7tQ", "destination": "bF724YU5TvumqsDMmGNubg"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_config(workdir: Path, port: int, cport: int, mport: int) -> Path:
    path = workdir / "server.properties"
    path.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{cport}",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={workdir / 'logs'}",
                "num.partitions=3",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=4",
                "mirror.topic.replication.factor=1",
                "mirror.topic.num.partitions=4",
                "group.initial.rebalance.delay.ms=0",
                f"metrics.port={mport}",
                "",
            ]
        )
    )
    return path


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"node exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"node did not listen on {port} within {timeout}s")


def demo(bootstrap: str, records: int) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for _topic, fut in admin.create_topics([NewTopic("quickstart", 3, 1)]).items():
        fut.result(timeout=10)
    print("created topic 'quickstart' (3 partitions)")

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "lz4",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    failed: list[object] = []
    started = time.perf_counter()
    for i in range(records):
        producer.produce(
            "quickstart",
            key=b"key-%d" % (i % 100),
            value=b"value-%08d" % i,
            on_delivery=lambda e, m: failed.append(e) if e else None,
        )
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(30) or failed:
        raise SystemExit(f"produce failed: {failed[:3]}")
    took = time.perf_counter() - started
    print(
        f"produced {records} records (lz4, idempotent, acks=all) in {took:.2f}s: {records / took:,.0f} records/s"
    )

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "quickstart-group",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["quickstart"])
    seen = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 60
    while seen < records and time.monotonic() < deadline:
        for msg in consumer.consume(1000, timeout=1.0):
            if msg.error():
                raise KafkaException(msg.error())
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    took = time.perf_counter() - started
    print(
        f"consumed {seen} records with consumer group 'quickstart-group' in {took:.2f}s; offsets committed"
    )
    if seen != records:
        raise SystemExit(f"expected {records} records, consumed {seen}")


def _start_node(
    workdir: Path, name: str, keep: bool, started: list[subprocess.Popen[bytes]]
) -> tuple[int, int]:
    """Format and start one node; it joins ``started`` as soon as it runs (so a signal while it
    comes up still finds it). Returns its Kafka and metrics ports."""
    home = workdir / name
    home.mkdir(parents=True, exist_ok=True)
    port, cport, mport = _free_port(), _free_port(), _free_port()
    config = _write_config(home, port, cport, mport)
    subprocess.run(
        [
            str(ROOT / "bin" / "kafka-storage.sh"),
            "format",
            "-t",
            CLUSTER_IDS[name],
            "-c",
            str(config),
            "--ignore-formatted",
        ],
        check=True,
        capture_output=True,
    )
    log_path = home / "node.log"
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker", str(config)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=keep,  # kept nodes outlive a Ctrl-C sent to the terminal
        )
    started.append(proc)
    print(f"{name} node: pid {proc.pid}, log {log_path}", flush=True)
    _wait_listening(port, proc)
    print(f"{name} node: bootstrap 127.0.0.1:{port}, metrics http://127.0.0.1:{mport}/metrics")
    return port, mport


def _mirrors(*args: str) -> str:
    """kafka-mirrors.sh, in this process (the same code bin/kafka-mirrors.sh runs)."""
    import io

    from .mirrors import main as mirrors_main

    out, err = io.StringIO(), io.StringIO()
    rc = mirrors_main(list(args), out, err)
    if rc != 0:
        raise SystemExit(f"kafka-mirrors.sh {' '.join(args)} failed:\n{err.getvalue()}")
    return out.getvalue()


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "quickstart-probe"})
    try:
        return sum(
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            for p in range(partitions)
        )
    finally:
        c.close()


def mirror_demo(workdir: Path, source: str, destination: str, records: int) -> None:
    from confluent_kafka import Consumer, Producer

    demo(source, records)  # topic 'quickstart' with data on the source
    props = workdir / "mirror.properties"
    props.write_text(f"bootstrap.servers={source}\n")
    _mirrors(
        "--bootstrap-server",
        destination,
        "--create",
        "--mirror",
        "dr",
        "--mirror-config",
        str(props),
    )
    _mirrors("--bootstrap-server", destination, "--add", "--topic", "quick.*", "--mirror", "dr")
    print("created mirror 'dr' on the destination and added topics matching 'quick.*'")
    want = _end_offsets(source, "quickstart", 3)
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while _end_offsets(destination, "quickstart", 3) < want:
        if time.monotonic() > deadline:
            raise SystemExit("the mirror did not catch up within 120 s")
        time.sleep(0.2)
    took = time.perf_counter() - started
    print(f"mirrored {want} records in {took:.2f}s")
    print(_mirrors("--bootstrap-server", destination, "--describe", "--mirror", "dr").rstrip())
    ids = {side: _topic_id(side_bootstrap, "quickstart") for side, side_bootstrap in
           (("source", source), ("destination", destination))}  # fmt: skip
    same = "same" if ids["source"] == ids["destination"] else "DIFFERENT"
    print(f"topic id: source {ids['source']}, destination {ids['destination']} ({same})")
    total, all_same = 0, True
    for p in range(3):
        src = _partition_bytes(workdir / "source", "quickstart", p)
        dst = _partition_bytes(workdir / "destination", "quickstart", p)
        # the destination must hold exactly the source's batches up to its own end
        same_bytes = bool(dst) and src[: len(dst)] == dst
        verdict = "identical" if same_bytes else "DIFFERENT"
        print(f"partition {p}: {len(dst):,} bytes of record batches on each side, {verdict}")
        total += len(dst)
        all_same = all_same and same_bytes
    print(
        f"bytes identical: {'yes' if all_same else 'NO'} ({total:,} bytes of record batches in "
        "3 partitions, the destination's segment files against the source's)"
    )

    consumer = Consumer(
        {
            "bootstrap.servers": destination,
            "group.id": "dr-readers",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["quickstart"])
    seen, deadline = 0, time.monotonic() + 60
    while seen < want and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.consume(1000, timeout=1.0) if not m.error())
    consumer.close()
    print(f"a stock consumer read {seen} records from the mirror topic on the destination")

    _mirrors(
        "--bootstrap-server", destination, "--remove", "--topic", "quickstart", "--mirror", "dr"
    )
    producer = Producer({"bootstrap.servers": destination, "enable.idempotence": True})
    deadline = time.monotonic() + 60
    while True:
        failed: list[object] = []
        producer.produce(
            "quickstart",
            value=b"written after failover",
            on_delivery=lambda e, m: failed.append(e) if e else None,  # noqa: B023 (same list)  # noqa: B023 (same list)
        )
        producer.flush(10)
        if not failed:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the destination did not become writable: {failed[0]}")
        time.sleep(0.5)
    print("failed over: the topic is writable on the destination, a producer wrote to it")
    after = _end_offsets(destination, "quickstart", 3)
    print(
        "failover wrote a MIRROR_PID_RESET control batch to each destination partition, so each\n"
        "  ended one offset past the source's before the new record (a control batch takes an\n"
        "  offset, as a transaction marker does; consumers skip it)"
    )
    print(
        f"destination end offsets now sum to {after} = {want} mirrored + 3 failover markers "
        "+ 1 new record"
    )


def _topic_id(bootstrap: str, topic: str) -> str:
    """As Kafka prints it (URL-safe base64; librdkafka's str() uses the standard alphabet)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    return str(desc.topic_id).replace("+", "-").replace("/", "_")


def _partition_bytes(node_dir: Path, topic: str, partition: int) -> bytes:
    """The partition's record batches as stored (segment files, oldest first)."""
    pdir = node_dir / "logs" / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(pdir.glob("*.log")))


# (what it counts, Prometheus sample name): summed over their labels for the closing table
SUMMARY_METRICS = (
    ("bytes of Fetch responses from the source", "kafka_server_mirror_fetch_bytes_total"),
    ("record bytes appended to mirror topics", "kafka_server_mirror_appended_bytes_total"),
    ("Fetch responses from the source", "kafka_server_mirror_fetch_requests_total"),
    ("failed Fetch round trips", "kafka_server_mirror_fetch_errors_total"),
    ("failed mirror partitions", "kafka_server_mirror_failed_partitions"),
    ("requests served to clients", "kafka_network_request_requests_total"),
)


def _summary(metrics_url: str) -> list[tuple[str, str, str]]:
    """(what, value, metric name) for SUMMARY_METRICS; counts as integers."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    rows = []
    for what, name in SUMMARY_METRICS:
        value = sums.get(name)
        shown = "-" if value is None else f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"
        rows.append((what, shown, name))
    return rows


def _print_summary(metrics_url: str) -> None:
    rows = _summary(metrics_url)
    print(f"the destination's metrics ({metrics_url}, summed over labels):")
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    for what, value, name in rows:
        print(f"  {what:<{w0}}  {value:>{w1}}  {name}")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _left_running(procs: list[subprocess.Popen[bytes]], names: list[str]) -> None:
    alive = [(n, p.pid) for n, p in zip(names, procs, strict=False) if p.poll() is None]
    if not alive:
        return
    listed = ", ".join(f"{n} pid {pid}" for n, pid in alive)
    print(f"nodes left running: {listed}")
    print(f"stop them with: kill {' '.join(str(pid) for _n, pid in alive)}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Start a source and a destination kmirror node, mirror a topic, fail over."
    )
    parser.add_argument(
        "--records",
        type=int,
        default=100_000,
        help="records to produce at the source (default 100000)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave both nodes running at the end (their PIDs and a kill command are printed)",
    )
    args = parser.parse_args()
    if args.records <= 0:
        parser.error("--records must be positive")
    workdir = Path(
        os.environ.get("KMIRROR_QUICKSTART_DIR") or tempfile.mkdtemp(prefix="kmirror-quickstart-")
    )
    workdir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    names: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        # unwinds into the finally below: the nodes are stopped, or listed with --keep
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    status = 1
    try:
        ports: dict[str, tuple[int, int]] = {}  # name -> (Kafka port, metrics port)
        for name in ("source", "destination"):
            names.append(name)
            ports[name] = _start_node(workdir, name, args.keep, procs)
        source, destination = (f"127.0.0.1:{ports[n][0]}" for n in ("source", "destination"))
        mirror_demo(workdir, source, destination, args.records)
        _print_summary(f"http://127.0.0.1:{ports['destination'][1]}/metrics")
        status = 0
    except KeyboardInterrupt as e:
        print(f"interrupted ({e or 'SIGINT'})")
    finally:
        # no signal may cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if args.keep:
            _left_running(procs, names)
        else:
            _stop(procs)
            print("nodes stopped")
        print(f"data in {workdir}")
    return status


if __name__ == "__main__":
    sys.exit(main())
