"""``kafka-console-share-consumer.sh``: records of a topic read through a share group (KIP-932) on
standard output, with Apache Kafka 4.1's flags and output (ConsoleShareConsumer): the group is
``--group`` (default ``console-share-consumer``), every record printed is acknowledged ACCEPT
(``--release``: RELEASE, ``--reject``: REJECT), ``--max-messages`` and ``--timeout-ms`` end it as
in the console consumer, and it ends with ``Processed a total of N messages`` on stderr.
The formatters are the console consumer's (``print.delivery`` prints the delivery count).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, Final, TextIO

from broker.cli import message_formatters as formatters
from broker.cli.admin import CommandError, UsageError, optional_config
from broker.cli.console_consumer import log_error
from broker.cli.console_consumer_options import FORMATTER_PROPS_HELP
from broker.cli.jopt import Failed, Option, Tool, Usage, parse_int
from broker.cli.kafka_admin import KafkaAdmin
from broker.cli.kafka_clients import parse_key_values
from broker.cli.share_client import ACCEPT, REJECT, RELEASE, ShareConsumer

LOGGER: Final = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
DEFAULT_GROUP: Final = "console-share-consumer"

OPTIONS: Final[list[Option]] = [
    ("bootstrap-server", ("String", "server to connect to"), False,
     "REQUIRED: The server(s) to connect to."),
    ("command-config", ("String", "config file"), False,
     "Consumer config properties file. Note that [consumer-property] takes precedence over "
     "this config."),
    ("consumer-config", ("String", "config file"), False,
     "Consumer config properties file. Note that [consumer-property] takes precedence over "
     "this config."),
    ("consumer-property", ("String", "consumer_prop"), False,
     "A mechanism to pass user-defined properties in the form key=value to the consumer."),
    ("formatter", ("String", "class"), False,
     "The name of a class to use for formatting Kafka messages for display. (default: "
     f"{formatters.DEFAULT})"),
    ("formatter-config", ("String", "config file"), False,
     "Config properties file to initialize the message formatter. Note that [property] takes "
     "precedence over this config."),
    ("group", ("String", "share group id"), False,
     "The share group id of the consumer. (default: console-share-consumer)"),
    ("help", None, False, "Print usage information."),
    ("key-deserializer", ("String", "deserializer for key"), False,
     "The name of the class to use for deserializing keys."),
    ("max-messages", ("Integer", "num_messages"), False,
     "The maximum number of messages to consume before exiting. If not set, consumption is "
     "continual."),
    ("property", ("String", "prop"), False,
     FORMATTER_PROPS_HELP.replace(" print.epoch", " print.delivery=true|false\n print.epoch")),
    ("reject", None, False, "If specified, messages are rejected as they are consumed."),
    ("reject-message-on-error", None, False,
     "If there is an error when processing a message, reject it instead of halting."),
    ("release", None, False, "If specified, messages are released as they are consumed."),
    ("timeout-ms", ("Long", "timeout_ms"), False,
     "If specified, exit if no message is available for consumption for the specified "
     "interval."),
    ("topic", ("String", "topic"), False, "The topic to consume from."),
    ("value-deserializer", ("String", "deserializer for values"), False,
     "The name of the class to use for deserializing values."),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

TOOL: Final = Tool(
    intro="This tool helps to read data from Kafka topics using share groups and outputs it to "
    "standard output.",
    options=OPTIONS,
    repeated={"consumer-property", "property"},
)


@dataclass
class Settings:
    props: dict[str, str]
    group: str
    topic: str
    ack: int
    max_messages: int
    timeout_ms: int | None
    formatter: formatters.Formatter
    reject_on_error: bool


def _load(path: str | None, flag: str) -> dict[str, str]:
    try:
        return optional_config(path, flag)
    except UsageError as e:
        raise Failed(str(e)) from None


def settings(args: argparse.Namespace, err: TextIO) -> Settings:
    max_messages = parse_int(args.max_messages, "max-messages")
    timeout = parse_int(args.timeout_ms, "timeout-ms", 64)
    if not args.topic:
        raise Usage("--topic is a required argument")
    if not args.bootstrap_server:
        raise Usage('Missing required argument "[bootstrap-server]"')
    if args.reject and args.release:
        raise Usage("At most one of --reject and --release may be specified.")
    props = _load(args.consumer_config, "--consumer-config")
    props.update(_load(args.command_config, "--command-config"))
    extra = parse_key_values(args.consumer_property)
    groups: list[str] = []
    for source in (args.group, props.get("group.id"), extra.get("group.id")):
        if source is not None and source not in groups:
            groups.append(source)
    if len(groups) > 1:
        raise Usage(
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property', or via '--consumer-config') do not match. Detected group "
            "ids: " + ", ".join(f"'{g}'" for g in groups)
        )
    props.update(extra)
    props.setdefault("client.id", DEFAULT_GROUP)
    fprops = _load(args.formatter_config, "--formatter-config")
    if args.key_deserializer:
        fprops["key.deserializer"] = args.key_deserializer
    if args.value_deserializer:
        fprops["value.deserializer"] = args.value_deserializer
    fprops.update(parse_key_values(args.property))
    try:
        formatter = formatters.build(args.formatter or formatters.DEFAULT, fprops, err)
    except formatters.FormatterError as e:
        raise Usage(str(e)) from None
    return Settings(
        props=props,
        group=groups[0] if groups else DEFAULT_GROUP,
        topic=args.topic,
        ack=REJECT if args.reject else RELEASE if args.release else ACCEPT,
        max_messages=-1 if max_messages is None else max_messages,
        timeout_ms=timeout if timeout is not None and timeout >= 0 else None,
        formatter=formatter,
        reject_on_error=args.reject_message_on_error,
    )


async def consume(s: Settings, bootstrap: str, out: BinaryIO, err: TextIO) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    got: list[int] = []

    def on_signal(code: int) -> None:
        got.append(code)
        stop.set()

    loop.add_signal_handler(signal.SIGINT, on_signal, 130)
    loop.add_signal_handler(signal.SIGTERM, on_signal, 143)
    count = 0
    admin: KafkaAdmin | None = None
    consumer: ShareConsumer | None = None
    try:
        admin = await KafkaAdmin.open(bootstrap, s.props, s.props["client.id"], "shareFetch")
        consumer = ShareConsumer(admin, s.group, s.topic)
        await consumer.join()
        last = time.monotonic()
        while (s.max_messages < 0 or count < s.max_messages) and not stop.is_set():
            wait = 500 if s.timeout_ms is None else max(0, min(500, s.timeout_ms))
            records = await consumer.poll(wait)
            if not records:
                if s.timeout_ms is not None and (time.monotonic() - last) * 1000 >= s.timeout_ms:
                    log_error(err, "Error processing message, terminating consumer process: ",
                              "org.apache.kafka.common.errors.TimeoutException", LOGGER)  # fmt: skip
                    break
                continue
            last = time.monotonic()
            for r in records:
                if 0 <= s.max_messages <= count:  # not printed: back to the group at close
                    consumer.acknowledge(r, RELEASE)
                    continue
                count += 1
                try:
                    s.formatter.write(r, out)
                    out.flush()
                    consumer.acknowledge(r, s.ack)
                except (BrokenPipeError, OSError):
                    print("Unable to write to standard out, closing consumer.", file=err)
                    consumer.acknowledge(r, RELEASE)
                    stop.set()
                except Exception as e:
                    if not s.reject_on_error:
                        raise
                    log_error(err, "Error processing message, rejecting this message: ",
                              str(e), LOGGER)  # fmt: skip
                    consumer.acknowledge(r, REJECT)
    except CommandError as e:
        log_error(err, "Unknown error when running consumer: ", str(e), LOGGER)
        return 1
    finally:
        if consumer is not None:
            await consumer.close()
        if admin is not None:
            admin.close()
        print(f"Processed a total of {count} messages", file=err, flush=True)
    return got[0] if got else 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        s = settings(args, err)
        binary: BinaryIO = getattr(out, "buffer", None) or sys.stdout.buffer
        return asyncio.run(consume(s, args.bootstrap_server, binary, err))

    return TOOL.main(argv, out, err, start)


if __name__ == "__main__":
    sys.exit(main())
