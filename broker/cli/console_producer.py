"""``kafka-console-producer.sh``: one record per line of standard input, with Apache Kafka 4.1's
flags, defaults (acks -1, linger 1000 ms, request timeout 1500 ms, no compression; gzip for a bare
``--compression-codec``) and line reader (``--property parse.key``, ``key.separator``,
``parse.headers``, ``headers.delimiter``, ``headers.separator``, ``headers.key.separator``,
``null.marker``, ``ignore.error``), through aiokafka.

As in Kafka: records are sent asynchronously unless ``--sync`` (a failed send is logged and the
tool goes on), every record read is flushed before the tool exits, and a line the reader cannot
parse ends it with the exception on stderr and exit 1. ``>`` prompts when stdin is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

from broker.cli.admin import UsageError, optional_config
from broker.cli.jopt import Failed, Option, Tool, Usage, validate_bootstrap
from broker.cli.kafka_clients import ClientConfigError, client_kwargs, parse_key_values

LINE_READER: Final = "org.apache.kafka.tools.LineMessageReader"

OPTIONS: Final[list[Option]] = [
    ("batch-size", ("Integer", "size"), False,
     "Number of messages to send in a single batch if they are not being sent synchronously. "
     "please note that this option will be replaced if max-partition-memory-bytes is also set "
     "(default: 16384)"),
    ("bootstrap-server", ("String", "server to connect to"), False,
     "REQUIRED: The server(s) to connect to. The broker list string in the form "
     "HOST1:PORT1,HOST2:PORT2."),
    ("command-config", ("String", "config file"), False,
     "Producer config properties file. Note that [command-property] takes precedence over "
     "this config."),
    ("command-property", ("String", "producer_prop"), False,
     "Producer config properties in the form key=value."),
    ("compression-codec", ("String", "compression-codec"), True,
     "The compression codec: either 'none', 'gzip', 'snappy', 'lz4', or 'zstd'.If specified "
     "without value, then it defaults to 'gzip'"),
    ("help", None, False, "Print usage information."),
    ("line-reader", ("String", "reader_class"), False,
     "The class name of the class to use for reading lines from standard in. By default each "
     f"line is read as a separate message. (default: {LINE_READER})"),
    ("max-block-ms", ("Long", "max block on send"), False,
     "The max time that the producer will block for during a send request. (default: 60000)"),
    ("max-memory-bytes", ("Long", "total memory in bytes"), False,
     "The total memory used by the producer to buffer records waiting to be sent to the "
     "server. This is the option to control `buffer.memory` in producer configs. (default: "
     "33554432)"),
    ("max-partition-memory-bytes", ("Integer", "memory in bytes per partition"), False,
     "The buffer size allocated for a partition. When records are received which are smaller "
     "than this size the producer will attempt to optimistically group them together until "
     "this size is reached. This is the option to control `batch.size` in producer configs. "
     "(default: 16384)"),
    ("message-send-max-retries", ("Integer", ""), False,
     "Brokers can fail receiving the message for multiple reasons, and being unavailable "
     "transiently is just one of them. This property specifies the number of retries before "
     "the producer give up and drop this message. This is the option to control `retries` in "
     "producer configs. (default: 3)"),
    ("metadata-expiry-ms", ("Long", "metadata expiration interval"), False,
     "The period of time in milliseconds after which we force a refresh of metadata even if "
     "we haven't seen any leadership changes. This is the option to control "
     "`metadata.max.age.ms` in producer configs. (default: 300000)"),
    ("producer-property", ("String", "producer_prop"), False,
     "A mechanism to pass user-defined properties in the form key=value to the producer. "),
    ("producer.config", ("String", "config file"), False,
     "Producer config properties file. Note that [producer-property] takes precedence over "
     "this config."),
    ("property", ("String", "prop"), False,
     "A mechanism to pass user-defined properties in the form key=value to the message "
     "reader. This allows custom configuration for a user-defined message reader.\n"
     "Default properties include:\n parse.key=false\n parse.headers=false\n ignore.error=false"
     "\n key.separator=\\t\n headers.delimiter=\\t\n headers.separator=,\n "
     "headers.key.separator=:\n null.marker=   When set, any fields (key, value and headers) "
     "equal to this will be replaced by null\nDefault parsing pattern when:\n parse.headers="
     'true and parse.key=true:\n  "h1:v1,h2:v2...\\tkey\\tvalue"\n parse.key=true:\n  '
     '"key\\tvalue"\n parse.headers=true:\n  "h1:v1,h2:v2...\\tvalue"'),
    ("reader-config", ("String", "config file"), False,
     "Config properties file for the message reader. Note that [property] takes precedence "
     "over this config."),
    ("request-required-acks", ("String", "request required acks"), False,
     "The required `acks` of the producer requests (default: -1)"),
    ("request-timeout-ms", ("Integer", "request timeout ms"), False,
     "The ack timeout of the producer requests. Value must be non-negative and non-zero. "
     "(default: 1500)"),
    ("retry-backoff-ms", ("Long", ""), False,
     "Before each retry, the producer refreshes the metadata of relevant topics. Since leader "
     "election takes a bit of time, this property specifies the amount of time that the "
     "producer waits before refreshing the metadata. This is the option to control "
     "`retry.backoff.ms` in producer configs. (default: 100)"),
    ("socket-buffer-size", ("Integer", "size"), False,
     "The size of the tcp RECV size. This is the option to control `send.buffer.bytes` in "
     "producer configs. (default: 102400)"),
    ("sync", None, False,
     "If set message send requests to the brokers are synchronously, one at a time as they "
     "arrive."),
    ("timeout", ("Long", "timeout_ms"), False,
     "If set and the producer is running in asynchronous mode, this gives the maximum amount "
     "of time a message will queue awaiting sufficient batch size. The value is given in ms. "
     "This is the option to control `linger.ms` in producer configs. (default: 1000)"),
    ("topic", ("String", "topic"), False, "REQUIRED: The topic name to produce messages to."),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

TOOL: Final = Tool(
    intro="This tool helps to read data from standard input and publish it to Kafka.",
    options=OPTIONS,
    repeated={"property", "producer-property", "command-property"},
)

# option -> (producer property, its default): CommandLineUtils.maybeMergeOptions
MERGED: Final = (
    ("timeout", "linger.ms", "1000"),
    ("request_required_acks", "acks", "-1"),
    ("request_timeout_ms", "request.timeout.ms", "1500"),
    ("retry_backoff_ms", "retry.backoff.ms", "100"),
    ("batch_size", "batch.size", "16384"),
    ("max_partition_memory_bytes", "batch.size", "16384"),
    ("metadata_expiry_ms", "metadata.max.age.ms", "300000"),
)


class ReaderError(Exception):
    """org.apache.kafka.common.KafkaException from the line reader."""


@dataclass(frozen=True, slots=True)
class Line:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class LineReader:
    """Kafka's LineMessageReader: ``[headers<delimiter>][key<separator>]value`` per line."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(key: str) -> bool:
            return props.get(key, "false").strip().lower() == "true"

        self.parse_key, self.parse_headers = flag("parse.key"), flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = props.get("key.separator", "\t")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.null_marker = props.get("null.marker")
        for a, b in (
            ("headers.delimiter", "headers.separator"),
            ("headers.delimiter", "headers.key.separator"),
            ("headers.separator", "headers.key.separator"),
        ):
            if self._get(a) == self._get(b):
                raise ReaderError(f"{a} and {b} may not be equal")
        for other in ("key.separator", "headers.separator", "headers.delimiter",
                      "headers.key.separator"):  # fmt: skip
            if self._get(other) == self.null_marker:
                raise ReaderError(f"null.marker and {other} may not be equal")
        try:
            self.split_headers = re.compile(self.headers_separator)
        except re.error as e:
            raise ReaderError(f"invalid headers.separator: {e}") from None
        self.line_number = 0

    def _get(self, key: str) -> str:
        return str(getattr(self, key.replace(".", "_")))

    def _part(self, enabled: bool, line: str, start: int, sep: str, name: str) -> str | None:
        if not enabled:
            return None
        i = line.find(sep, start)
        if i < 0:
            if self.ignore_error:
                return None
            raise ReaderError(f"No {name} found on line number {self.line_number}: '{line}'")
        return line[start:i]

    def _bytes(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else text.encode("utf-8")

    def parse(self, line: str) -> Line:
        self.line_number += 1
        headers = self._part(
            self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter"
        )
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(self.parse_key, line, header_end, self.key_separator, "key separator")
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_end + key_end :]
        parsed: list[tuple[str, bytes | None]] = []
        if headers is not None and headers != self.null_marker:
            for pair in self.split_headers.split(headers):
                i = pair.find(self.headers_key_separator)
                if i < 0:
                    if self.ignore_error:
                        parsed.append((pair, None))
                        continue
                    raise ReaderError(
                        f"No header key separator found in pair '{pair}' on line number "
                        f"{self.line_number}"
                    )
                name = pair[:i]
                if name == self.null_marker:
                    raise ReaderError(
                        f"Header keys should not be equal to the null marker '{self.null_marker}'"
                        " as they can't be null"
                    )
                parsed.append((name, self._bytes(pair[i + len(self.headers_key_separator) :])))
        return Line(self._bytes(key), self._bytes(value), parsed)


def read_lines(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None], prompt: bool, out: TextIO
) -> None:
    """Standard input's lines without their terminator (``\\n``, ``\\r\\n`` or ``\\r``, as
    readLine gives) onto ``queue``, None at the end. Runs in a daemon thread: a blocked read
    never holds the exit."""
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline=None)
    while True:
        if prompt:
            print(">", end="", file=out, flush=True)
        line = stdin.readline()
        if not line:
            loop.call_soon_threadsafe(queue.put_nowait, None)
            return
        loop.call_soon_threadsafe(queue.put_nowait, line[:-1] if line.endswith("\n") else line)


def producer_props(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = {}
    for flag in ("producer.config", "command-config"):
        value = getattr(args, flag.replace("-", "_"))
        if value is not None:
            props.update(optional_config(value, f"--{flag}"))
    props.update(parse_key_values(args.producer_property + args.command_property))
    props["bootstrap.servers"] = args.bootstrap_server
    codec = args.compression_codec
    props["compression.type"] = "none" if codec is None else (codec or "gzip")
    props.setdefault("client.id", "console-producer")
    for option, key, default in MERGED:
        value = getattr(args, option)
        if value is not None:
            props[key] = value
        else:
            props.setdefault(key, default)
    return props


async def produce(args: argparse.Namespace, reader: LineReader, out: TextIO, err: TextIO) -> int:
    try:
        kwargs = client_kwargs(producer_props(args), consumer=False)
    except ClientConfigError as e:
        raise Failed(f"org.apache.kafka.common.config.ConfigException: {e}") from None
    producer = AIOKafkaProducer(**kwargs)
    try:
        await producer.start()
    except Exception as e:  # aiokafka's KafkaConnectionError and friends
        await producer.stop()
        raise Failed(f"org.apache.kafka.common.KafkaException: {e}") from None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=0)
    prompt = os.isatty(sys.stdin.fileno()) and out.isatty()
    threading.Thread(target=read_lines, args=(loop, queue, prompt, out), daemon=True).start()
    stopped = asyncio.ensure_future(stop.wait())
    pending: set[asyncio.Future[Any]] = set()
    status = 0
    try:
        while True:
            read = asyncio.ensure_future(queue.get())
            await asyncio.wait({read, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                read.cancel()
                break
            text = read.result()
            if text is None:
                break
            try:
                record = reader.parse(text)
            except ReaderError as e:
                print(f"org.apache.kafka.common.KafkaException: {e}", file=err)
                status = 1
                break
            sent = await send(producer, args.topic, record)
            if args.sync:
                await _delivered(sent, args.topic, record, err)
            else:
                fut = asyncio.ensure_future(_delivered(sent, args.topic, record, err))
                pending.add(fut)
                fut.add_done_callback(pending.discard)
    finally:
        await producer.flush()
        if pending:
            await asyncio.gather(*pending)
        await producer.stop()
        stopped.cancel()
    return 130 if stop.is_set() and status == 0 else status


async def send(producer: Any, topic: str, record: Line) -> Any:
    """aiokafka's send, but a record with neither key nor value too (Kafka sends those; aiokafka
    0.14, pinned, refuses them in ``send`` only, so its own steps are taken here)."""
    if record.key is not None or record.value is not None:
        return await producer.send(
            topic, value=record.value, key=record.key, headers=record.headers or None
        )
    await producer.client._wait_on_metadata(topic)
    headers = record.headers or []
    partition = producer._partition(topic, None, None, None, None, None)
    return await producer._message_accumulator.add_message(
        TopicPartition(topic, partition),
        None,
        None,
        producer._request_timeout_ms / 1000,
        timestamp_ms=None,
        headers=headers,
    )


async def _delivered(sent: Any, topic: str, record: Line, err: TextIO) -> None:
    """Kafka's ErrorLoggingCallback: a failed send is logged, the tool goes on."""
    try:
        await sent
    except Exception as e:
        value = "null" if record.value is None else f"{len(record.value)} bytes"
        key = "null" if record.key is None else f"{len(record.key)} bytes"
        print(
            f"ERROR Error when sending message to topic {topic} with key: {key}, value: {value} "
            f"with error: ({type(e).__name__}: {e})",
            file=err,
        )


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        if not args.topic:
            raise Usage('Missing required argument "[topic]"')
        validate_bootstrap(args.bootstrap_server)
        if (args.line_reader or LINE_READER) != LINE_READER:
            raise Failed(f"java.lang.ClassNotFoundException: {args.line_reader}")
        props: dict[str, str] = {}
        try:
            if args.reader_config:
                props.update(optional_config(args.reader_config, "--reader-config"))
        except UsageError as e:
            raise Failed(str(e)) from None
        props["topic"] = args.topic
        props.update(parse_key_values(args.property))
        try:
            reader = LineReader(props)
        except ReaderError as e:
            raise Failed(f"org.apache.kafka.common.KafkaException: {e}") from None
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # Kafka's tools log WARN up
        try:
            return asyncio.run(produce(args, reader, out, err))
        except UsageError as e:
            raise Failed(str(e)) from None

    return TOOL.main(argv, out, err, start)


if __name__ == "__main__":
    sys.exit(main())
