"""The main job: a source and a destination cluster on this machine, mirrored, then failed over.

``bin/quickstart.sh`` runs this: it formats and starts a source node and a destination of three
combined broker+controller nodes forming one KRaft quorum (``--destination-nodes 1``: one node),
with three replicas of every topic and internal topic and two in sync for acks=all, on free
loopback ports under ``$KMIRROR_QUICKSTART_DIR`` (default: a new temporary directory). It produces
to the source with a stock idempotent lz4 producer, creates a mirror with kafka-mirrors.sh
semantics (create, add, describe), shows that both sides hold the same topic id and that every
destination replica holds the source's record batches byte for byte, reads the mirror topic on
the destination with a stock consumer, fails over (remove) and produces to the destination with
acks=all. At the end, on an error, on SIGTERM or on SIGINT it stops the nodes it started (SIGTERM,
by PID, all at once); with ``--keep`` it leaves them running instead and prints their PIDs and
the command that stops them, so they are never left behind unsaid.
"""

import argparse
import os
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .quickstart_nodes import (
    ClusterSpec,
    Started,
    plan_cluster,
    print_left_running,
    start_clusters,
    stop_all,
)

TOPIC, PARTITIONS = "quickstart", 3
DESTINATION_SIZES = (1, 3)  # one node, or a quorum of three (RF=3, min.insync.replicas=2)
# Three: the layout replication is for, and it still runs in about 8 s on two cores (one node: 4 s).
DEFAULT_DESTINATION_NODES = 3
# librdkafka's info lines (level 6, e.g. "BGQUEUE ... Purging 1 unserved events" when an admin
# client that knew several brokers is destroyed) would land in the middle of the demo's output.
QUIET = {"log_level": 5}


def demo(bootstrap: str, records: int) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for _topic, fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).items():
        fut.result(timeout=10)
    print(f"created topic {TOPIC!r} ({PARTITIONS} partitions)")

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


def mirror_demo(workdir: Path, source: ClusterSpec, destination: ClusterSpec, records: int) -> None:
    demo(source.bootstrap, records)  # topic 'quickstart' with data on the source
    want = _create_mirror(workdir, source, destination)
    if destination.size > 1:
        _print_replicas(destination)
    print(_describe_at_lag_zero(destination.bootstrap).rstrip())
    ids = {c.side: _topic_id(c.bootstrap, TOPIC) for c in (source, destination)}
    same = "same" if ids["source"] == ids["destination"] else "DIFFERENT"
    print(f"topic id: source {ids['source']}, destination {ids['destination']} ({same})")
    _compare_bytes(source, destination)
    _consume_mirror(destination.bootstrap, want)
    _fail_over(destination)
    _print_end_offsets(destination.bootstrap, want)


def _create_mirror(workdir: Path, source: ClusterSpec, destination: ClusterSpec) -> int:
    """Mirror 'dr' on the destination, topics 'quick.*' added; returns the records mirrored once
    the destination's high watermarks (on a quorum of three: replicated to the ISR) reach the
    source's end offsets."""
    props = workdir / "mirror.properties"
    props.write_text(f"bootstrap.servers={source.bootstrap}\n")
    dst = destination.bootstrap
    _mirrors("--bootstrap-server", dst, "--create", "--mirror", "dr", "--mirror-config", str(props))
    _mirrors("--bootstrap-server", dst, "--add", "--topic", "quick.*", "--mirror", "dr")
    where = "" if destination.size == 1 else f" ({destination.size} nodes)"
    print(f"created mirror 'dr' on the destination{where} and added topics matching 'quick.*'")
    want = _end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while _mirrored_so_far(dst) < want:
        if time.monotonic() > deadline:
            raise SystemExit("the mirror did not catch up within 120 s")
        time.sleep(0.2)
    print(f"mirrored {want} records in {time.perf_counter() - started:.2f}s")
    return want


def _mirrored_so_far(bootstrap: str) -> int:
    """The destination's end offsets summed; 0 while the node asked does not know the new topic
    yet (on a quorum of three, each node applies the topic's metadata record at its own pace)."""
    from confluent_kafka import KafkaException

    try:
        return _end_offsets(bootstrap, TOPIC, PARTITIONS)
    except KafkaException:
        return 0


def _print_replicas(destination: ClusterSpec) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": destination.bootstrap, **QUIET})
    md = admin.list_topics(TOPIC, timeout=10)
    print(
        f"the mirror topic on the destination: replication factor "
        f"{destination.replication_factor}, min.insync.replicas {destination.min_insync_replicas}"
    )
    for p, part in sorted(md.topics[TOPIC].partitions.items()):
        print(
            f"  partition {p}: leader node {part.leader}, replicas {list(part.replicas)}, "
            f"in sync {sorted(part.isrs)}"
        )


def _describe_at_lag_zero(bootstrap: str, timeout: float = 30) -> str:
    """``--describe``, asked again until every partition's LAG is 0 (a leader learns the source's
    end offset with its next Fetch answer), or the last answer after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        table = _mirrors("--bootstrap-server", bootstrap, "--describe", "--mirror", "dr")
        rows = [line.split() for line in table.splitlines()[1:] if line.startswith("dr ")]
        lags = [row[5] for row in rows if len(row) > 5]
        if (lags and all(lag == "0" for lag in lags)) or time.monotonic() > deadline:
            return table
        time.sleep(0.2)


def _compare_bytes(source: ClusterSpec, destination: ClusterSpec) -> None:
    """Each partition's segment bytes on every destination replica against the source's."""
    total, all_same = 0, True
    for p in range(PARTITIONS):
        src = _partition_bytes(source.nodes[0].home, TOPIC, p)
        for node in destination.nodes:
            dst = _replica_bytes(node.home, p, len(src))
            # the destination must hold exactly the source's batches up to its own end
            same_bytes = bool(dst) and src[: len(dst)] == dst
            verdict = "identical" if same_bytes else "DIFFERENT"
            if destination.size == 1:
                print(
                    f"partition {p}: {len(dst):,} bytes of record batches on each side, {verdict}"
                )
            else:
                print(
                    f"partition {p} on {node.name}: {len(dst):,} bytes of record batches, "
                    f"{verdict} to the source's"
                )
            all_same = all_same and same_bytes
        total += len(src)
    where = (
        "the destination's segment files against the source's"
        if destination.size == 1
        else f"on each of the {destination.size} destination nodes, against the source's"
    )
    print(
        f"bytes identical: {'yes' if all_same else 'NO'} ({total:,} bytes of record batches in "
        f"{PARTITIONS} partitions, {where})"
    )


def _replica_bytes(node_dir: Path, partition: int, expected: int, timeout: float = 30) -> bytes:
    """The replica's bytes once it holds ``expected`` of them: a follower may still be a fetch
    behind the high watermark's last step. After ``timeout``, what it holds."""
    deadline = time.monotonic() + timeout
    while True:
        held = _partition_bytes(node_dir, TOPIC, partition)
        if len(held) >= expected or time.monotonic() > deadline:
            return held
        time.sleep(0.1)


def _consume_mirror(bootstrap: str, want: int) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "dr-readers",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([TOPIC])
    seen, deadline = 0, time.monotonic() + 60
    while seen < want and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.consume(1000, timeout=1.0) if not m.error())
    consumer.close()
    print(f"a stock consumer read {seen} records from the mirror topic on the destination")


def _fail_over(destination: ClusterSpec) -> None:
    """``--remove``, then one record with acks=all, retried until the topic takes it."""
    from confluent_kafka import Producer

    dst = destination.bootstrap
    _mirrors("--bootstrap-server", dst, "--remove", "--topic", TOPIC, "--mirror", "dr")
    producer = Producer({"bootstrap.servers": dst, "enable.idempotence": True, "acks": "all"})
    deadline = time.monotonic() + 60
    while True:
        failed: list[object] = []
        producer.produce(
            TOPIC,
            value=b"written after failover",
            on_delivery=lambda e, m: failed.append(e) if e else None,  # noqa: B023 (same list)
        )
        producer.flush(10)
        if not failed:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the destination did not become writable: {failed[0]}")
        time.sleep(0.5)
    insync = (
        ""
        if destination.size == 1
        else " (acknowledged once every in-sync replica holds it; refused while fewer than "
        f"min.insync.replicas={destination.min_insync_replicas} are in sync)"
    )
    print(
        "failed over: the topic is writable on the destination, a producer wrote to it "
        f"with acks=all{insync}"
    )


def _print_end_offsets(bootstrap: str, mirrored: int) -> None:
    expected = mirrored + PARTITIONS + 1
    # a marker counts once the ISR holds it: on a quorum of three, a follower's next fetch
    deadline = time.monotonic() + 10
    while (after := _end_offsets(bootstrap, TOPIC, PARTITIONS)) < expected:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    print(
        "failover wrote a MIRROR_PID_RESET control batch to each destination partition, so each\n"
        "  ended one offset past the source's before the new record (a control batch takes an\n"
        "  offset, as a transaction marker does; consumers skip it)"
    )
    print(
        f"destination end offsets now sum to {after} = {mirrored} mirrored + {PARTITIONS} "
        "failover markers + 1 new record"
    )


def _topic_id(bootstrap: str, topic: str) -> str:
    """As Kafka prints it (URL-safe base64; librdkafka's str() uses the standard alphabet)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
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


def _scrape_sums(metrics_urls: list[str]) -> dict[str, float]:
    """Every sample summed over its labels and over the nodes."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    for url in metrics_urls:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


def _summary(metrics_urls: list[str]) -> list[tuple[str, str, str]]:
    """(what, value, metric name) for SUMMARY_METRICS; counts as integers."""
    sums = _scrape_sums(metrics_urls)
    rows = []
    for what, name in SUMMARY_METRICS:
        value = sums.get(name)
        shown = "-" if value is None else f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"
        rows.append((what, shown, name))
    return rows


def _print_summary(destination: ClusterSpec) -> None:
    urls = [n.metrics_url for n in destination.nodes]
    rows = _summary(urls)
    where = f"{urls[0]}, summed over labels" if len(urls) == 1 else "summed over nodes and labels"
    print(f"the destination's metrics ({where}):")
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    for what, value, name in rows:
        print(f"  {what:<{w0}}  {value:>{w1}}  {name}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quickstart.sh",
        description="Start a source and a destination kmirror cluster, mirror a topic, fail over.",
    )
    parser.add_argument(
        "--records",
        type=int,
        default=100_000,
        help="records to produce at the source (default 100000)",
    )
    parser.add_argument(
        "--destination-nodes",
        type=int,
        choices=DESTINATION_SIZES,
        default=DEFAULT_DESTINATION_NODES,
        metavar="N",
        help="nodes of the destination cluster: 3 (default; one KRaft quorum of combined "
        "broker+controller nodes, replication factor 3, min.insync.replicas=2) or 1",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the nodes running at the end (their PIDs and a kill command are printed)",
    )
    return parser


def _workdir() -> Path:
    workdir = Path(
        os.environ.get("KMIRROR_QUICKSTART_DIR") or tempfile.mkdtemp(prefix="kmirror-quickstart-")
    )
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def main() -> int:
    parser = _parser()
    args = parser.parse_args()
    if args.records <= 0:
        parser.error("--records must be positive")
    workdir = _workdir()
    started: Started = []

    def on_signal(signum: int, _frame: object) -> None:
        # unwinds into the finally below: the nodes are stopped, or listed with --keep
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    status = 1
    try:
        source = plan_cluster(workdir, "source", 1)
        destination = plan_cluster(workdir, "destination", args.destination_nodes)
        start_clusters([source, destination], args.keep, started)
        mirror_demo(workdir, source, destination, args.records)
        _print_summary(destination)
        status = 0
    except KeyboardInterrupt as e:
        print(f"interrupted ({e or 'SIGINT'})")
    finally:
        # no signal may cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if args.keep:
            print_left_running(started)
        else:
            stop_all(started)
            print("nodes stopped")
        print(f"data in {workdir}")
    return status


if __name__ == "__main__":
    sys.exit(main())
