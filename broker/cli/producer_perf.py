"""``kafka-producer-perf-test.sh``: produce ``--num-records`` records of ``--record-size`` bytes
(or from ``--payload-file``, or ``--payload-monotonic``) at up to ``--throughput`` records/s and
print Apache Kafka 4.1's ProducerPerformance lines: every 5 s "N records sent, R records/sec
(M MB/sec), A ms avg latency, X ms max latency." and at the end the total with the 50th, 95th,
99th and 99.9th latency percentiles (latency: send to acknowledgement, ms; at most 500,000
sampled, as Kafka samples).

The producer is librdkafka's (confluent-kafka), configured from ``--producer-props`` /
``--producer.config`` (or ``--bootstrap-server`` / ``--command-config`` /
``--command-property``); Java-only keys (serializers, buffer.memory) are ignored. Transactions
as Kafka's: ``--transactional-id`` or ``--transaction-duration-ms`` (commit every that many ms).
Bad command lines: argparse4j's usage and error, exit 1; no arguments: the help, exit 0.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from broker.cli.admin import UsageError, load
from broker.cli.kafka_args import KafkaParser, parse, usage_error

TOOL: Final = "producer-performance"
REPORT_MS: Final = 5000
_JAVA_ONLY: Final = frozenset(
    {"key.serializer", "value.serializer", "buffer.memory", "max.block.ms", "interceptor.classes"}
)


def _parser() -> argparse.ArgumentParser:
    p = KafkaParser(
        prog=TOOL,
        description="This tool is used to verify the producer performance. To enable "
        "transactions, you can specify a transaction id or set a transaction duration using "
        "--transaction-duration-ms.",
    )
    p.add_argument("--topic", required=True, metavar="TOPIC", help="produce messages to this topic")
    p.add_argument(
        "--num-records", type=int, required=True, metavar="NUM-RECORDS", dest="num_records"
    )
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--record-size", type=int, metavar="RECORD-SIZE", dest="record_size")
    g.add_argument("--payload-file", metavar="PAYLOAD-FILE", dest="payload_file")
    g.add_argument("--payload-monotonic", action="store_true", dest="payload_monotonic")
    p.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER")
    p.add_argument("--throughput", type=float, required=True, metavar="THROUGHPUT")
    p.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE", dest="props")
    p.add_argument("--producer.config", metavar="CONFIG-FILE", dest="config_file")
    p.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVER", dest="bootstrap")
    p.add_argument("--command-config", metavar="CONFIG-FILE", dest="command_config")
    p.add_argument("--command-property", nargs="+", metavar="PROP-NAME=PROP-VALUE")
    p.add_argument("--print-metrics", action="store_true", dest="print_metrics")
    p.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID", dest="transactional_id")
    p.add_argument(
        "--transaction-duration-ms", type=int, metavar="TRANSACTION-DURATION", dest="txn_ms"
    )
    return p


class Stats:
    """Kafka's ProducerPerformance.Stats: totals, a 5 s window, sampled latencies."""

    def __init__(self, num_records: int, out: TextIO, now_ms: int) -> None:
        self.out = out
        self.start = self.window_start = now_ms
        self.sampling = max(1, num_records // min(num_records, 500_000))
        self.latencies: list[int] = []
        self.iteration = 0
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.w_count = self.w_bytes = self.w_total = self.w_max = 0

    def record(self, latency: int, size: int, now_ms: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        self.w_count += 1
        self.w_bytes += size
        self.w_total += latency
        self.w_max = max(self.w_max, latency)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency)
        self.iteration += 1
        if now_ms - self.window_start >= REPORT_MS:
            self.print_window(now_ms)
            self.window_start = now_ms
            self.w_count = self.w_bytes = self.w_total = self.w_max = 0

    def print_window(self, now_ms: int) -> None:
        elapsed = max(1, now_ms - self.window_start)
        print(
            f"{self.w_count} records sent, {1000.0 * self.w_count / elapsed:.1f} records/sec "
            f"({1000.0 * self.w_bytes / elapsed / (1024.0 * 1024.0):.2f} MB/sec), "
            f"{self.w_total / max(1, self.w_count):.1f} ms avg latency, "
            f"{float(self.w_max):.1f} ms max latency.",
            file=self.out,
            flush=True,
        )

    def print_total(self, now_ms: int) -> None:
        elapsed = max(1, now_ms - self.start)
        lat = sorted(self.latencies) or [0]
        p50, p95, p99, p999 = (
            lat[min(len(lat) - 1, int(q * len(lat)))] for q in (0.5, 0.95, 0.99, 0.999)
        )
        avg = self.total_latency / self.count if self.count else float("nan")
        print(
            f"{self.count} records sent, {1000.0 * self.count / elapsed:.1f} records/sec "
            f"({1000.0 * self.bytes / elapsed / (1024.0 * 1024.0):.2f} MB/sec), "
            f"{avg:.2f} ms avg latency, {float(self.max_latency):.2f} ms max latency, "
            f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th.",
            file=self.out,
            flush=True,
        )


def _props(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = {}
    for path in (args.config_file, args.command_config):
        if path is not None:
            if not Path(path).exists():
                raise UsageError(f"{path} (No such file or directory)")
            props.update(load(path, "producer config"))
    for item in (args.props or []) + (args.command_property or []):
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"Invalid property: {item}")
        props[key.strip()] = value.strip()
    if args.bootstrap is not None:
        props["bootstrap.servers"] = args.bootstrap
    return {k: v for k, v in props.items() if k not in _JAVA_ONLY}


def _payloads(args: argparse.Namespace, out: TextIO) -> list[bytes]:
    if args.payload_file is None:
        return []
    path = Path(args.payload_file)
    print(f"Reading payloads from: {path.resolve()}", file=out)
    delimiter = "\n" if args.payload_delimiter == "\\n" else args.payload_delimiter
    items = [p.encode() for p in path.read_text(encoding="utf-8").split(delimiter) if p]
    if not items:
        raise UsageError(f"File does not contain payloads: {path}")
    print(f"Number of messages read: {len(items)}", file=out)
    return items


def now() -> int:
    return int(time.time() * 1000)


def run(args: argparse.Namespace, out: TextIO) -> None:
    from confluent_kafka import KafkaException, Producer

    props = _props(args)
    payloads = _payloads(args, out)
    txn_ms = args.txn_ms
    transactional = (
        txn_ms is not None or args.transactional_id is not None or "transactional.id" in props
    )
    if transactional:
        props["transactional.id"] = args.transactional_id or props.get(
            "transactional.id", f"performance-producer-{uuid.uuid4()}"
        )
        txn_ms = txn_ms or 3000
    producer = Producer(props)
    if transactional:
        producer.init_transactions(30)
    stats = Stats(args.num_records, out, now())
    failures: list[str] = []
    fixed = bytes(args.record_size or 0)
    start = time.monotonic()
    in_txn, txn_start = 0, 0

    def callback(sent_ms: int, size: int) -> Any:
        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                if not failures:
                    failures.append(str(err))
                return
            t = now()
            stats.record(t - sent_ms, size, t)

        return done

    for i in range(args.num_records):
        if args.payload_monotonic:
            value = str(i).encode()
        elif payloads:
            value = payloads[i % len(payloads)]
        else:
            value = fixed
        if transactional and in_txn == 0:
            producer.begin_transaction()
            txn_start = now()
        sent = now()
        while True:
            try:
                producer.produce(args.topic, value, on_delivery=callback(sent, len(value)))
                break
            except BufferError:
                producer.poll(0.05)
            except KafkaException as e:
                raise UsageError(str(e)) from None
        producer.poll(0)
        in_txn += 1
        if transactional and txn_ms <= sent - txn_start:
            producer.commit_transaction(60)
            in_txn = 0
        if args.throughput > 0:
            ahead = (i + 1) / args.throughput - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    if transactional and in_txn:
        producer.commit_transaction(60)
    producer.flush(120)
    if failures:
        print(f"Error when sending message to topic {args.topic}: {failures[0]}", file=sys.stderr)
    stats.print_total(now())


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        parser.print_help(out)
        return 0
    args = parse(parser, argv, out, err)
    if isinstance(args, int):
        return args
    for bad, message in (
        (args.num_records <= 0, "--num-records should be greater than zero"),
        (
            args.record_size is not None and args.record_size <= 0,
            "--record-size should be greater than zero",
        ),
        (
            args.props is None and args.config_file is None and args.bootstrap is None,
            "Either --producer-props or --producer.config must be specified.",
        ),
        (
            args.txn_ms is not None and args.txn_ms <= 0,
            "--transaction-duration-ms should be greater than zero",
        ),
    ):
        if bad:
            return usage_error(parser, message, err)
    try:
        run(args, out)
        return 0
    except UsageError as e:
        print(e, file=err)
        return 1
    except KeyboardInterrupt:
        return 1
    except Exception as e:  # no traceback for the operator: what failed, in one line
        print(f"{type(e).__name__}: {e}", file=err)
        return 1


if __name__ == "__main__":
    sys.exit(main())
