"""``kafka-consumer-perf-test.sh``: consume ``--messages`` records of ``--topic`` in a consumer
group and print Apache Kafka 4.1's ConsumerPerformance lines: the header, then
"start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec" values (or, with
``--show-detailed-stats``, one progress line every ``--reporting-interval`` ms), and Kafka's
warning when ``--timeout`` ms pass without a record.

The consumer is librdkafka's (confluent-kafka), from ``--consumer.config`` /
``--command-config``. joptsimple's options and messages: a missing required option prints the
message and the option table on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, TextIO

from broker.cli.admin import UsageError, optional_config, version
from broker.cli.consumer_groups_options import Option, build_parser, render_help

INTRO: Final = "This tool is used to verify the consumer performance."
OPTIONS: Final[list[Option]] = [
    ("bootstrap-server", ("String", "server to connect to"), False,
     "REQUIRED: The server(s) to connect to."),
    ("command-config", ("String", "config file"), False, "Consumer config properties file."),
    ("consumer.config", ("String", "config file"), False, "Consumer config properties file."),
    ("date-format", ("String", "date format"), False,
     "The date format to use for formatting the time field. See java.text.SimpleDateFormat "
     "for options. (default: yyyy-MM-dd HH:mm:ss:SSS)"),
    ("fetch-size", ("Integer", "size"), False,
     "The amount of data to fetch in a single request. (default: 1048576)"),
    ("from-latest", None, False,
     "If the consumer does not already have an established offset to consume from, start "
     "with the latest message present in the log rather than the earliest message."),
    ("group", ("String", "gid"), False, "The group id to consume on."),
    ("help", None, False, "Print usage information."),
    ("hide-header", None, False, "If set, skips printing the header for the stats"),
    ("messages", ("Long", "count"), False, "REQUIRED: The number of messages to consume."),
    ("print-metrics", None, False, "Print out the metrics."),
    ("reporting-interval", ("Long", "interval_ms"), False,
     "Interval in milliseconds at which to print progress info. (default: 5000)"),
    ("show-detailed-stats", None, False,
     "If set, stats are reported for each reporting interval as configured by "
     "reporting-interval"),
    ("socket-buffer-size", ("Integer", "size"), False,
     "The size of the tcp RECV size. (default: 2097152)"),
    ("timeout", ("Long", "milliseconds"), False,
     "The maximum allowed time in milliseconds between returned records. (default: 10000)"),
    ("topic", ("String", "topic"), False, "REQUIRED: The topic to consume from."),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip
HELP: Final = render_help("", OPTIONS)[1:]
_JAVA_DATE: Final = (
    ("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"),
    ("ss", "%S"),
)  # fmt: skip


def date_format(pattern: str) -> Any:
    """A formatter for a java.text.SimpleDateFormat pattern (y M d H m s S letters)."""
    parts = re.split(r"(SSS)", pattern)

    def fmt(ms: int) -> str:
        dt = datetime.fromtimestamp(ms / 1000)
        out = []
        for part in parts:
            if part == "SSS":
                out.append(f"{ms % 1000:03d}")
                continue
            for java, py in _JAVA_DATE:
                part = part.replace(java, py)
            out.append(dt.strftime(part))
        return "".join(out)

    return fmt


def _long(args: argparse.Namespace, name: str, default: int) -> int:
    value = getattr(args, name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        flag = name.replace("_", "-")
        raise UsageError(f"Cannot parse argument '{value}' of option {flag}") from None


def run(args: argparse.Namespace, out: TextIO) -> None:
    from confluent_kafka import Consumer

    props: dict[str, Any] = {}
    for path, flag in (
        (getattr(args, "consumer.config"), "--consumer.config"),
        (args.command_config, "--command-config"),
    ):
        props.update(optional_config(path, flag))
    messages = _long(args, "messages", 0)
    timeout_ms = _long(args, "timeout", 10_000)
    interval_ms = _long(args, "reporting_interval", 5_000)
    if interval_ms <= 0:
        raise UsageError("Reporting interval must be greater than 0.")
    fmt = date_format(args.date_format or "yyyy-MM-dd HH:mm:ss:SSS")
    props.update(
        {
            "bootstrap.servers": args.bootstrap_server,
            "group.id": args.group or f"perf-consumer-{random.randrange(100_000)}",
            "socket.receive.buffer.bytes": _long(args, "socket_buffer_size", 2 * 1024 * 1024),
            "max.partition.fetch.bytes": _long(args, "fetch_size", 1024 * 1024),
            "auto.offset.reset": "latest" if args.from_latest else "earliest",
            "check.crcs": False,
        }
    )
    props.setdefault("client.id", "perf-consumer-client")
    detailed = args.show_detailed_stats
    if not args.hide_header:
        extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        first = "time, threadId" if detailed else "start.time, end.time"
        print(
            f"{first}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}",
            file=out,
        )
    join = {"total": 0, "round": 0, "started": _now_ms()}

    def assigned(_c: Any, _parts: Any) -> None:
        t = _now_ms()
        join["total"] += t - join["started"]
        join["round"] += t - join["started"]

    def revoked(_c: Any, _parts: Any) -> None:
        join["started"] = _now_ms()

    consumer = Consumer(props)
    start = _now_ms()
    read = bytes_read = last_read = last_bytes = 0
    last_report = last_consumed = current = start
    try:
        consumer.subscribe([args.topic], on_assign=assigned, on_revoke=revoked)
        while read < messages and current - last_consumed <= timeout_ms:
            batch = consumer.consume(num_messages=min(10_000, messages - read), timeout=0.1)
            current = _now_ms()
            if batch:
                last_consumed = current
            for m in batch:
                if m.error() is not None:
                    continue
                read += 1
                bytes_read += len(m.key() or b"") + len(m.value() or b"")
                if current - last_report >= interval_ms:
                    if detailed:
                        _progress(
                            out,
                            fmt,
                            read,
                            bytes_read,
                            last_read,
                            last_bytes,
                            last_report,
                            current,
                            join["round"],
                        )
                    join["round"] = 0
                    last_report, last_read, last_bytes = current, read, bytes_read
        if read < messages:
            print(
                f"WARNING: Exiting before consuming the expected number of messages: timeout "
                f"({timeout_ms} ms) exceeded. You can use the --timeout option to increase the "
                "timeout.",
                file=out,
            )
    finally:
        consumer.close()
    end = _now_ms()
    if not detailed:
        elapsed = (end - start) / 1000.0
        fetch_ms = (end - start) - join["total"]
        mb = bytes_read / (1024 * 1024)
        print(
            f"{fmt(start)}, {fmt(end)}, {mb:.4f}, {j4(_div(mb, elapsed))}, {read}, "
            f"{j4(_div(read, elapsed))}, {join['total']}, {fetch_ms}, "
            f"{j4(_div(mb, fetch_ms / 1000.0))}, {j4(_div(read, fetch_ms / 1000.0))}",
            file=out,
        )


def _now_ms() -> int:
    return int(time.time() * 1000)


def j4(x: float) -> str:
    """Java's ``%.4f``: Infinity and NaN spelled as Java spells them."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return f"{x:.4f}"


def _div(a: float, b: float) -> float:
    """Java's double division: x/0 is Infinity (NaN for 0/0)."""
    if b == 0:
        return float("nan") if a == 0 else float("inf")
    return a / b


def _progress(
    out: TextIO, fmt: Any, read: int, nbytes: int, last_read: int, last_bytes: int,
    start: int, end: int, join_round: int,
) -> None:  # fmt: skip
    elapsed = end - start
    mb = nbytes / (1024 * 1024)
    interval_mb = (nbytes - last_bytes) / (1024 * 1024)
    fetch_ms = elapsed - join_round
    print(
        f"{fmt(end)}, 0, {mb:.4f}, {j4(_div(1000.0 * interval_mb, elapsed))}, {read}, "
        f"{j4(_div(read - last_read, elapsed) * 1000.0)}, {join_round}, {fetch_ms}, "
        f"{0.0 if fetch_ms <= 0 else 1000.0 * interval_mb / fetch_ms:.4f}, "
        f"{0.0 if fetch_ms <= 0 else 1000.0 * (read - last_read) / fetch_ms:.4f}",
        file=out,
    )


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser("kafka-consumer-perf-test", OPTIONS, set()).parse_args(argv)
        if not argv or args.help:
            print(INTRO, file=err)
            err.write(HELP)
            return 1
        if args.version:
            print(version(), file=out)
            return 0
        for name in ("topic", "messages", "bootstrap-server"):
            if getattr(args, name.replace("-", "_")) is None:
                print(f'Missing required argument "[{name}]"', file=err)
                err.write(HELP)
                return 1
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
