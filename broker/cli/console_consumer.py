"""``kafka-console-consumer.sh``: records of a topic (or of the topics ``--include`` matches) on
standard output, with Apache Kafka 4.1's flags, formatters and exit behaviour (ConsoleConsumer),
through aiokafka.

As in Kafka: ``--group`` joins that group and commits what was printed; without one a random
``console-consumer-N`` group reads without committing. ``--partition`` (with ``--offset``:
``earliest``, ``latest`` or a number) reads one partition without a group. ``--max-messages``
stops after that many records, ``--timeout-ms`` when none arrived for that long (logged as
Kafka logs its TimeoutException); either way, and on SIGINT/SIGTERM, the tool ends with
``Processed a total of N messages`` on stderr. A closed stdout ends it too.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import re
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, BinaryIO, Final, TextIO

from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

from broker.cli import console_consumer_options as options
from broker.cli.jopt import Failed
from broker.cli.kafka_clients import ClientConfigError, client_kwargs
from broker.cli.message_formatters import Record

LOGGER: Final = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TIMESTAMP_TYPE: Final = {0: 0, 1: 1}


def log_error(err: TextIO, text: str, cause: str, logger: str = LOGGER) -> None:
    """A log4j ERROR line as Kafka's tools log it, with the exception's line under it."""
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    print(f"[{now}] ERROR {text} ({logger})\n{cause}", file=err, flush=True)


def to_record(m: Any) -> Record:
    return Record(
        topic=str(m.topic),
        partition=int(m.partition),
        offset=int(m.offset),
        timestamp=int(m.timestamp),
        timestamp_type=TIMESTAMP_TYPE.get(int(m.timestamp_type), -1),
        key=m.key,
        value=m.value,
        headers=[(str(k), None if v is None else bytes(v)) for k, v in (m.headers or ())],
    )


class Console:
    def __init__(self, s: options.Settings, out: BinaryIO, err: TextIO) -> None:
        self.s, self.out, self.err = s, out, err
        self.count = 0
        self.stop = asyncio.Event()

    async def open(self) -> Any:
        try:
            kwargs = client_kwargs(self.s.consumer, consumer=True)
        except ClientConfigError as e:
            raise Failed(f"org.apache.kafka.common.config.ConfigException: {e}") from None
        if self.s.partition is not None:
            # one partition, assigned by hand: no group membership, nothing committed
            kwargs["enable_auto_commit"] = False
            kwargs.pop("group_id", None)
        kwargs.setdefault("enable_auto_commit", True)
        consumer = AIOKafkaConsumer(**kwargs)
        try:
            await consumer.start()
        except Exception as e:  # aiokafka's KafkaConnectionError and friends
            await consumer.stop()
            log_error(self.err, "Unknown error when running consumer: ",
                      f"org.apache.kafka.common.KafkaException: {e}")  # fmt: skip
            raise Failed(f"Processed a total of {self.count} messages") from None
        if self.s.partition is not None:
            assert self.s.topic is not None
            tp = TopicPartition(self.s.topic, self.s.partition)
            consumer.assign([tp])
            if self.s.offset == options.EARLIEST:
                await consumer.seek_to_beginning(tp)
            elif self.s.offset == options.LATEST:
                await consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, self.s.offset)
        elif self.s.topic is not None:
            consumer.subscribe([self.s.topic])
        else:
            assert self.s.include is not None
            consumer.subscribe(pattern=_java_regex(self.s.include))
        return consumer

    async def run(self) -> int:
        consumer = await self.open()
        limit, timeout = self.s.max_messages, self.s.timeout_ms
        try:
            last = time.monotonic()
            while limit < 0 or self.count < limit:
                if self.stop.is_set():
                    break
                wait_ms = 500 if timeout is None else max(0, min(500, timeout))
                want = None if limit < 0 else limit - self.count
                got = await consumer.getmany(timeout_ms=wait_ms, max_records=want)
                records = [m for batch in got.values() for m in batch]
                if not records:
                    if timeout is not None and (time.monotonic() - last) * 1000 >= timeout:
                        log_error(
                            self.err,
                            "Error processing message, terminating consumer process: ",
                            "org.apache.kafka.common.errors.TimeoutException",
                        )
                        break
                    continue
                last = time.monotonic()
                records.sort(key=lambda m: (m.topic, m.partition, m.offset))
                if not self.write(records):
                    break
        finally:
            try:
                await consumer.stop()  # commits what was printed when the group commits
            finally:
                print(f"Processed a total of {self.count} messages", file=self.err, flush=True)
        return 0

    def write(self, records: list[Any]) -> bool:
        for m in records:
            self.count += 1
            try:
                self.s.formatter.write(to_record(m), self.out)
                self.out.flush()
            except (BrokenPipeError, OSError):
                print("Unable to write to standard out, closing consumer.", file=self.err)
                return False
            except Exception as e:
                if not self.s.skip_on_error:
                    raise
                log_error(self.err, "Error processing message, skipping this message: ", str(e))
        return True


def _java_regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise Failed(f"java.util.regex.PatternSyntaxException: {e}") from None
    return text


async def consume(s: options.Settings, out: BinaryIO, err: TextIO) -> int:
    console = Console(s, out, err)
    loop = asyncio.get_running_loop()
    got: list[int] = []

    def on_signal(code: int) -> None:
        got.append(code)
        console.stop.set()

    loop.add_signal_handler(signal.SIGINT, on_signal, 130)
    loop.add_signal_handler(signal.SIGTERM, on_signal, 143)
    status = await console.run()
    return got[0] if got else status


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        s = options.settings(args, err)
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # Kafka's tools log WARN up
        binary: BinaryIO = getattr(out, "buffer", None) or sys.stdout.buffer
        return asyncio.run(consume(s, binary, err))

    return options.TOOL.main(argv, out, err, start)


if __name__ == "__main__":
    sys.exit(main())
