"""``kafka-console-consumer.sh``'s options and the checks Kafka 4.1's ConsoleConsumerOptions makes,
with its messages: one of ``--topic``/``--include``, ``--partition`` only with ``--topic`` and not
with a group, ``--offset`` only with ``--partition`` and not with ``--from-beginning``, one group
id wherever it is given, and the consumer properties it builds (a random ``console-consumer-N``
group without auto-commit when none is given, ``auto.offset.reset`` from ``--from-beginning``).
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from typing import Final, TextIO

from broker.cli import message_formatters as formatters
from broker.cli.admin import UsageError, optional_config
from broker.cli.jopt import Failed, Option, Tool, Usage, parse_int
from broker.cli.kafka_clients import parse_key_values

EARLIEST, LATEST = -2, -1
FORMATTER_PROPS_HELP: Final = (
    "The properties to initialize the message formatter. Default properties include: \n"
    " print.timestamp=true|false\n print.key=true|false\n print.offset=true|false\n"
    " print.epoch=true|false\n print.partition=true|false\n print.headers=true|false\n"
    " print.value=true|false\n key.separator=<key.separator>\n"
    " line.separator=<line.separator>\n headers.separator=<line.separator>\n"
    " null.literal=<null.literal>\n key.deserializer=<key.deserializer>\n"
    " value.deserializer=<value.deserializer>\n header.deserializer=<header.deserializer>\n"
    "\nUsers can also pass in customized properties for their formatter; more specifically, "
    "users can pass in properties keyed with 'key.deserializer.', 'value.deserializer.' and "
    "'headers.deserializer.' prefixes to configure their deserializers."
)

OPTIONS: Final[list[Option]] = [
    ("bootstrap-server", ("String", "server to connect to"), False,
     "REQUIRED: The server(s) to connect to."),
    ("command-config", ("String", "config file"), False,
     "Consumer config properties file. Note that [command-property] takes precedence over "
     "this config."),
    ("command-property", ("String", "consumer_prop"), False,
     "Consumer config properties in the form key=value."),
    ("consumer-property", ("String", "consumer_prop"), False,
     "A mechanism to pass user-defined properties in the form key=value to the consumer."),
    ("consumer.config", ("String", "config file"), False,
     "Consumer config properties file. Note that [consumer-property] takes precedence over "
     "this config."),
    ("enable-systest-events", None, False,
     "Log lifecycle events of the consumer in addition to logging consumed messages. (This is "
     "specific for system tests.)"),
    ("formatter", ("String", "class"), False,
     "The name of a class to use for formatting kafka messages for display. (default: "
     f"{formatters.DEFAULT})"),
    ("formatter-config", ("String", "config file"), False,
     "Config properties file to initialize the message formatter. Note that [property] takes "
     "precedence over this config."),
    ("formatter-property", ("String", "prop"), False, FORMATTER_PROPS_HELP),
    ("from-beginning", None, False,
     "If the consumer does not already have an established offset to consume from, start "
     "with the earliest message present in the log rather than the latest message."),
    ("group", ("String", "consumer group id"), False, "The consumer group id of the consumer."),
    ("help", None, False, "Print usage information."),
    ("include", ("String", "Java regex (String)"), False,
     "Regular expression specifying list of topics to include for consumption."),
    ("isolation-level", ("String", ""), False,
     "Set to read_committed in order to filter out transactional messages which are not "
     "committed. Set to read_uncommitted to read all messages. (default: read_uncommitted)"),
    ("key-deserializer", ("String", "deserializer for key"), False, ""),
    ("max-messages", ("Integer", "num_messages"), False,
     "The maximum number of messages to consume before exiting. If not set, consumption is "
     "continual."),
    ("offset", ("String", "consume offset"), False,
     "The offset to consume from (a non-negative number), or 'earliest' which means from "
     "beginning, or 'latest' which means from end (default: latest)"),
    ("partition", ("Integer", "partition"), False,
     "The partition to consume from. Consumption starts from the end of the partition unless "
     "'--offset' is specified."),
    ("property", ("String", "prop"), False, FORMATTER_PROPS_HELP),
    ("skip-message-on-error", None, False,
     "If there is an error when processing a message, skip it instead of halt."),
    ("timeout-ms", ("Long", "timeout_ms"), False,
     "If specified, exit if no message is available for consumption for the specified "
     "interval."),
    ("topic", ("String", "topic"), False, "The topic to consume on."),
    ("value-deserializer", ("String", "deserializer for values"), False, ""),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

REPEATED: Final = {
    "consumer-property",
    "command-property",
    "property",
    "formatter-property",
}

TOOL: Final = Tool(
    intro="This tool helps to read data from Kafka topics and outputs it to standard output.",
    options=OPTIONS,
    repeated=REPEATED,
)


@dataclass
class Settings:
    consumer: dict[str, str]
    topic: str | None
    include: str | None
    partition: int | None
    offset: int  # EARLIEST, LATEST or an offset
    max_messages: int  # -1: no limit
    timeout_ms: int | None
    formatter: formatters.Formatter
    skip_on_error: bool
    group_given: bool


def _load(path: str | None, flag: str) -> dict[str, str]:
    try:
        return optional_config(path, flag)
    except UsageError as e:
        raise Failed(str(e)) from None


def settings(args: argparse.Namespace, err: TextIO) -> Settings:
    """ConsoleConsumerOptions' checks, in its order, and what they build."""
    partition = parse_int(args.partition, "partition")
    max_messages = parse_int(args.max_messages, "max-messages")
    timeout = parse_int(args.timeout_ms, "timeout-ms", 64)
    if (args.topic is None) == (args.include is None):
        raise Usage("Exactly one of --include/--topic is required. ")
    if partition is not None:
        if args.topic is None:
            raise Usage("The topic is required when partition is specified.")
        if args.from_beginning and args.offset is not None:
            raise Usage("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        raise Usage("The partition is required when offset is specified.")
    if not args.bootstrap_server:
        raise Usage('Missing required argument "[bootstrap-server]"')
    props = _load(getattr(args, "consumer.config"), "--consumer.config")
    props.update(_load(args.command_config, "--command-config"))
    extra = parse_key_values(args.consumer_property + args.command_property)
    groups: list[str] = []
    for source in (args.group, props.get("group.id"), extra.get("group.id")):
        if source is not None and source not in groups:
            groups.append(source)
    if len(groups) > 1:
        raise Usage(
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property', or via '--consumer.config') do not match. Detected group "
            "ids: " + ", ".join(f"'{g}'" for g in groups)
        )
    if groups and partition is not None:
        raise Usage("Options group and partition cannot be specified together.")
    consumer = {**props, **extra}
    reset = consumer.get("auto.offset.reset")
    if reset is not None:
        if args.from_beginning and reset != "earliest":
            raise Failed(
                f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                "please remove one option"
            )
    else:
        consumer["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    consumer["bootstrap.servers"] = args.bootstrap_server
    consumer.setdefault("client.id", "console-consumer")
    if args.isolation_level is not None or "isolation.level" not in consumer:
        consumer["isolation.level"] = args.isolation_level or "read_uncommitted"
    if groups:
        consumer["group.id"] = groups[0]
    else:
        consumer["group.id"] = f"console-consumer-{random.randrange(100000)}"
        consumer.setdefault("enable.auto.commit", "false")
    return Settings(
        consumer=consumer,
        topic=args.topic,
        include=args.include,
        partition=partition,
        offset=_offset(args),
        max_messages=-1 if max_messages is None else max_messages,
        timeout_ms=timeout if timeout is not None and timeout >= 0 else None,
        formatter=_formatter(args, err),
        skip_on_error=args.skip_message_on_error,
        group_given=bool(groups),
    )


def _offset(args: argparse.Namespace) -> int:
    text = args.offset
    if text is None:
        return EARLIEST if args.from_beginning else LATEST
    if text.lower() == "earliest":
        return EARLIEST
    if text.lower() == "latest":
        return LATEST
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise Usage(
            f"The provided offset value '{text}' is incorrect. Valid values are 'earliest', "
            "'latest', or a non-negative long."
        )
    return n


def _formatter(args: argparse.Namespace, err: TextIO) -> formatters.Formatter:
    props = _load(args.formatter_config, "--formatter-config")
    if args.key_deserializer:
        props["key.deserializer"] = args.key_deserializer
    if args.value_deserializer:
        props["value.deserializer"] = args.value_deserializer
    props.update(parse_key_values(args.property + args.formatter_property))
    try:
        return formatters.build(args.formatter or formatters.DEFAULT, props, err)
    except formatters.FormatterError as e:
        raise Usage(str(e)) from None
