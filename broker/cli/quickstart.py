"""The main job's demo: format and start a local node, drive it with a stock client, stop it.

``bin/quickstart.sh`` runs this. It uses free loopback ports and a fresh directory under
``$KMIRROR_QUICKSTART_DIR`` (default: a new temporary directory), and stops the node it started
(SIGTERM, by PID) whatever happens.
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
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"


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


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Start a local kmirror node and run a produce/consume demo against it."
    )
    parser.add_argument(
        "--records", type=int, default=100_000, help="records to produce (default 100000)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the node running until Ctrl-C")
    args = parser.parse_args()
    if args.records <= 0:
        parser.error("--records must be positive")

    workdir = Path(
        os.environ.get("KMIRROR_QUICKSTART_DIR") or tempfile.mkdtemp(prefix="kmirror-quickstart-")
    )
    workdir.mkdir(parents=True, exist_ok=True)
    port, cport, mport = _free_port(), _free_port(), _free_port()
    config = _write_config(workdir, port, cport, mport)
    subprocess.run(
        [
            str(ROOT / "bin" / "kafka-storage.sh"),
            "format",
            "-t",
            CLUSTER_ID,
            "-c",
            str(config),
            "--ignore-formatted",
        ],
        check=True,
    )
    log_path = workdir / "node.log"
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker", str(config)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_listening(port, proc)
        bootstrap = f"127.0.0.1:{port}"
        print(
            f"kmirror node running: bootstrap {bootstrap}, metrics http://127.0.0.1:{mport}/metrics, data {workdir}"
        )
        demo(bootstrap, args.records)
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as resp:
            lines = [
                ln
                for ln in resp.read().decode().splitlines()
                if ln.startswith("kafka_network_request_requests_total")
            ]
        print(
            "requests served (Prometheus):",
            ", ".join(
                ln.split("{request=")[1].replace('"}', "=").replace('"', "") for ln in lines[:8]
            ),
        )
        if args.keep:
            print("node left running; Ctrl-C stops it")
            proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            print(f"node stopped (exit code {code}); its log is {log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
