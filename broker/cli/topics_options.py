"""``kafka-topics.sh``'s options, help and the checks Kafka 4.1's TopicCommandOptions makes, in its
order and with its messages (an action, ``--bootstrap-server``, ``--topic`` unless listing or
describing, ``--partitions`` with ``--alter``, and which options each action takes).
"""

from __future__ import annotations

import argparse
import re
from typing import Final

from broker.cli.jopt import Failed, Fatal, Option, Tool, Usage, parse_int
from broker.config.catalog import TOPIC_KEYS

NL = "\n"
CONFIGS_TOOL = " (To alter topic configurations, the kafka-configs tool can be used.)"
ACTIONS: Final = ("create", "list", "alter", "describe", "delete")
REPORTS: Final = (
    "under_replicated_partitions",
    "under_min_isr_partitions",
    "at_min_isr_partitions",
    "unavailable_partitions",
)

_CONFIG_NAMES = NL.join(sorted(TOPIC_KEYS))

OPTIONS: Final[list[Option]] = [
    ("alter", None, False,
     "Alter the number of partitions and replica assignment." + CONFIGS_TOOL),
    ("at-min-isr-partitions", None, False,
     "If set when describing topics, only show partitions whose isr count is equal to the "
     "configured minimum."),
    ("bootstrap-server", ("String", "server to connect to"), False,
     "REQUIRED: The Kafka server to connect to."),
    ("command-config", ("String", "command config property file"), False,
     "Property file containing configs to be passed to Admin Client."),
    ("config", ("String", "name=value"), False,
     "A topic configuration override for the topic being created. The following is a list of "
     "valid configurations: " + NL + _CONFIG_NAMES + NL + "See the Kafka documentation for "
     "full details on the topic configs. It is supported only in combination with --create."
     + CONFIGS_TOOL),
    ("create", None, False, "Create a new topic."),
    ("delete", None, False, "Delete a topic."),
    ("delete-config", ("String", "name"), False,
     "This option is no longer supported and has been deprecated since 4.0"),
    ("describe", None, False, "List details for the given topics."),
    ("exclude-internal", None, False,
     "Exclude internal topics when listing or describing topics. By default, the internal "
     "topics are included."),
    ("help", None, False, "Print usage information."),
    ("if-exists", None, False,
     "If set when altering or deleting or describing topics, the action will only execute if "
     "the topic exists."),
    ("if-not-exists", None, False,
     "If set when creating topics, the create request will not fail if the topic already "
     "exists, but the request will still be sent."),
    ("list", None, False, "List all available topics."),
    ("partition-size-limit-per-response",
     ("Integer", "maximum number of partitions per response"), False,
     "The maximum partition size to be included in one DescribeTopicPartitions response."),
    ("partitions", ("Integer", "# of partitions"), False,
     "The number of partitions for the topic being created or altered. If not supplied with "
     "--create, the topic uses the cluster default. (WARNING: If partitions are increased for "
     "a topic that has a key, the partition logic or ordering of the messages will be "
     "affected)."),
    ("replica-assignment",
     ("String", "broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , "
      "broker_id_for_part2_replica1 : broker_id_for_part2_replica2 , ..."), False,
     "A list of manual partition-to-broker assignments for the topic being created or "
     "altered."),
    ("replication-factor", ("Integer", "replication factor"), False,
     "The replication factor for each partition in the topic being created. If not supplied, "
     "the topic uses the cluster default."),
    ("topic", ("String", "topic"), False,
     "The topic to create, alter, describe or delete. It also accepts a regular expression, "
     "except for --create option."),
    ("topic-id", ("String", "topic-id"), False, "The topic-id to describe."),
    ("topics-with-overrides", None, False,
     "If set when describing topics, only show topics that have overridden configs."),
    ("unavailable-partitions", None, False,
     "If set when describing topics, only show partitions whose leader is not available."),
    ("under-min-isr-partitions", None, False,
     "If set when describing topics, only show partitions whose isr count is less than the "
     "configured minimum."),
    ("under-replicated-partitions", None, False,
     "If set when describing topics, only show under-replicated partitions."),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip


def failure(text: str) -> Failed:
    """TopicCommand's catch-all: the exception's message on stdout, exit 1."""
    return Failed(f"Error while executing topic command : {text}", stdout=True)


TOOL: Final = Tool(
    intro="This tool helps to create, delete, describe, or change a topic.",
    options=OPTIONS,
    repeated={"config", "delete-config"},
    no_args="Create, delete, describe, or change a topic.",
    parse_failure=failure,
)


def opt(name: str) -> str:
    return f"[{name.replace('_', '-')}]"


def _has(args: argparse.Namespace, name: str) -> bool:
    return getattr(args, name) not in (None, False, [])


def _invalid(args: argparse.Namespace, used: str, others: list[str]) -> None:
    """CommandLineUtils.checkInvalidArgs: ``used`` with any of ``others``."""
    if _has(args, used):
        for other in others:
            if _has(args, other):
                raise Usage(f'Option "{opt(used)}" can\'t be used with option "{opt(other)}"')


def _all_but(*keep: str, add: tuple[str, ...] = ()) -> list[str]:
    """The actions (Kafka's allTopicLevelOpts order) but ``keep``, then ``add``."""
    order = ["alter", "create", "describe", "list", "delete"]
    return [a for a in order if a not in keep] + [a for a in add if a not in keep]


def check(args: argparse.Namespace, err: object) -> None:
    """TopicCommandOptions.checkArgs, in its order."""
    for name in ("partitions", "replication_factor", "partition_size_limit_per_response"):
        try:
            setattr(args, name, parse_int(getattr(args, name), name.replace("_", "-")))
        except Usage as e:  # joptsimple's conversion fails where Kafka reads the value
            raise failure(str(e)) from None
    if sum(_has(args, a) for a in ACTIONS) != 1:
        raise Usage(
            "Command must include exactly one action: --list, --describe, --create, --alter or "
            "--delete"
        )
    if args.delete_config:
        print(
            "delete-config option is no longer supported and deprecated since version 4.0. The "
            "config will be fully removed in future releases.",
            file=err,  # type: ignore[call-overload]
        )
    if not args.bootstrap_server:
        raise Fatal("--bootstrap-server must be specified")
    if args.describe and args.if_exists and not args.topic and not args.topic_id:
        raise Usage("--topic or --topic-id is required to describe a topic")
    if not args.list and not args.describe and not args.topic:
        raise Usage(f'Missing required argument "{opt("topic")}"')
    if args.alter:
        if args.config:
            raise Usage(
                'Option combination "[bootstrap-server, config]" can\'t be used with option '
                f'"[alter]"{CONFIGS_TOOL}'
            )
        if args.partitions is None:
            raise Usage(f'Missing required argument "{opt("partitions")}"')
    _invalid(args, "config", _all_but("alter", "create"))
    _invalid(args, "partitions", _all_but("alter", "create"))
    _invalid(args, "replication_factor", _all_but("create"))
    _invalid(args, "replica_assignment", _all_but("alter", "create"))
    if args.create:
        _invalid(args, "replica_assignment", ["partitions", "replication_factor"])
    for report in REPORTS:
        _invalid(args, report, _all_but("describe", report, add=("topics_with_overrides",)))
    _invalid(args, "topics_with_overrides", _all_but("describe", add=REPORTS))
    _invalid(args, "if_exists", _all_but("alter", "delete", "describe"))
    _invalid(args, "if_not_exists", _all_but("create"))
    _invalid(args, "exclude_internal", _all_but("list", "describe"))


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``1:2,2:3``: partition i's replicas are the i-th comma-separated list."""
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise Fatal(f'For input string: "{part.strip()}"') from None
        dups = sorted({b for b in brokers if brokers.count(b) > 1})
        if dups:
            raise failure(
                "Partition replica lists may not contain duplicate entries: "
                + ",".join(map(str, dups))
            )
        out[i] = brokers
        if len(brokers) != len(out[0]):
            shown = "[" + ", ".join(map(str, brokers)) + "]"
            raise failure(f"Partition {i} has different replication factor: {shown}")
    return out


def parse_configs(values: list[str]) -> dict[str, str]:
    """``--config k=v`` (split on '=' with the spaces around it, exactly two parts)."""
    pairs = [re.split(r"\s*=\s*", v) for v in values]
    # Java's split drops trailing empty strings: "k=" is one part
    pairs = [p[:-1] if len(p) > 1 and p[-1] == "" else p for p in pairs]
    if not all(len(p) == 2 for p in pairs):
        raise Fatal(
            "requirement failed: Invalid topic config: all configs to be added must be in the "
            'format "key=val".'
        )
    return {k.strip(): v.strip() for k, v in pairs}
