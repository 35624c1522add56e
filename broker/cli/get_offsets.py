"""``kafka-get-offsets.sh``: each partition's offset for a time spec, as ``topic:partition:offset``
lines, with Apache Kafka 4.1's flags, output and exit codes (GetOffsetShell).

``--time``: ``latest``/-1 (default), ``earliest``/-2, ``max-timestamp``/-3, ``earliest-local``/-4,
``latest-tiered``/-5 or a timestamp in ms (the first offset at or after it). Partitions are
chosen by ``--topic`` (a regex) and ``--partitions`` (ids), or by ``--topic-partitions``
(``regex:N``, ``regex:N-M`` upper bound exclusive, ``regex:N-``, ``regex:-M``). Lines are sorted
as Kafka sorts them: by the text ``topic-partition``. A partition without an offset for the time
is left out; one whose leader refuses is reported on stderr and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from broker.cli.admin import CommandError, UsageError, code, optional_config
from broker.cli.jopt import Failed, Option, Tool, Usage, validate_bootstrap
from broker.cli.kafka_admin import KafkaAdmin, TopicFilter, exception

LIST_OFFSETS: Final = 2
SPECS: Final = {
    "latest": -1,
    "earliest": -2,
    "max-timestamp": -3,
    "earliest-local": -4,
    "latest-tiered": -5,
}
# the ListOffsets version each special timestamp needs
MIN_VERSION: Final = {-3: 7, -4: 8, -5: 9}
RETRIABLE: Final = frozenset({5, 6, 74, 75})  # no leader, not leader, fenced/unknown epoch
PATTERN: Final = r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?"
MAX_INT: Final = 2**31 - 1

OPTIONS: Final[list[Option]] = [
    ("bootstrap-server", ("String", "HOST1:PORT1,...,HOST3:PORT3"), False,
     "REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2."),
    ("command-config", ("String", "config file"), False,
     "Property file containing configs to be passed to Admin Client."),
    ("exclude-internal-topics", None, False,
     "By default, internal topics are included. If specified, internal topics are excluded."),
    ("help", None, False, "Print usage information."),
    ("partitions", ("String", "partition ids"), False,
     "Comma separated list of partition ids to get the offsets for. If not present, all "
     "partitions of the authorized topics are queried. Cannot be used if --topic-partitions "
     "is present."),
    ("time", ("String", "<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp / "
              "-4 or earliest-local / -5 or latest-tiered"), False,
     "timestamp of the offsets before that. [Note: No offset is returned, if the timestamp "
     "greater than recently committed record timestamp is given.] (default: latest)"),
    ("topic", ("String", "topic"), False,
     "The topic to get the offsets for. It also accepts a regular expression. If not present, "
     "all authorized topics are queried. Cannot be used if --topic-partitions is present."),
    ("topic-partitions", ("String", "topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3"), False,
     "Comma separated list of topic-partition patterns to get the offsets for, with the format "
     f"of '{PATTERN}'. The first group is an optional regex for the topic name, if omitted, it "
     "matches any topic name. The section after ':' describes a 'partition' pattern, which can "
     "be: a number, a range in the format of 'NUMBER-NUMBER' (lower inclusive, upper "
     "exclusive), an inclusive lower bound in the format of 'NUMBER-', an exclusive upper "
     "bound in the format of '-NUMBER' or may be omitted to accept all partitions."),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

INTRO: Final = "An interactive shell for getting topic-partition offsets."


def terse(text: str) -> Failed:
    """GetOffsetShell's TerseException: ``Error occurred: <message>`` on stderr, exit 1."""
    return Failed(f"Error occurred: {text}")


TOOL: Final = Tool(intro=INTRO, options=OPTIONS, parse_failure=terse)


@dataclass(frozen=True, slots=True)
class Rule:
    topics: TopicFilter
    low: int  # inclusive
    high: int  # exclusive
    ids: frozenset[int] | None = None  # --partitions: exactly these (empty: all)

    def allows(self, partition: int) -> bool:
        if self.ids is not None:
            return not self.ids or partition in self.ids
        return self.low <= partition < self.high


def parse_time(text: str) -> int:
    if text in SPECS:
        return SPECS[text]
    try:
        return int(text)
    except ValueError:
        raise terse(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
            "max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long "
            "format timestamp"
        ) from None


def rules(args: argparse.Namespace) -> list[Rule]:
    if args.topic_partitions is not None:
        out = []
        for spec in args.topic_partitions.split(","):
            m = re.fullmatch(PATTERN, spec)
            if m is None:
                raise terse(f"Invalid rule specification: {spec}")
            g = [x or None for x in m.groups()]
            topics = TopicFilter(g[0] or ".*")
            if g[1] is not None:
                out.append(Rule(topics, int(g[1]), int(g[1]) + 1))
            else:
                out.append(Rule(topics, int(g[2] or 0), int(g[3]) if g[3] else MAX_INT))
        return out
    ids: frozenset[int] = frozenset()
    if args.partitions:
        try:
            ids = frozenset(int(p) for p in args.partitions.split(","))
        except ValueError:
            raise terse(
                "--partitions expects a comma separated list of numeric partition ids, but "
                f"received: {args.partitions}"
            ) from None
    return [Rule(TopicFilter(args.topic or ".*"), 0, 0, ids)]


async def fetch(admin: KafkaAdmin, args: argparse.Namespace, err: TextIO) -> list[str]:
    timestamp = parse_time(args.time or "latest")
    chosen = rules(args)
    found = await admin.metadata(None)
    partitions = sorted(
        (name, p.partition)
        for name, t in found.items()
        if t is not None and not (args.exclude_internal_topics and t.internal)
        for p in t.partitions
        if any(r.topics.allows(name) and r.allows(p.partition) for r in chosen)
    )
    if not partitions:
        raise terse("Could not match any topic-partitions with the specified filters")
    offsets = await list_offsets(admin, partitions, timestamp, err)
    return [
        f"{t}:{p}:{offsets[(t, p)]}"
        for t, p in sorted(offsets, key=lambda tp: f"{tp[0]}-{tp[1]}")
        if offsets[(t, p)] != -1
    ]


async def list_offsets(
    admin: KafkaAdmin, partitions: list[tuple[str, int]], timestamp: int, err: TextIO
) -> dict[tuple[str, int], int]:
    """ListOffsets on each partition's leader; a leader moving is asked again (bounded)."""
    todo = set(partitions)
    out: dict[tuple[str, int], int] = {}
    for attempt in range(20):
        leaders: dict[int, list[tuple[str, int]]] = {}
        found = await admin.metadata(sorted({t for t, _ in todo}))
        for t, p in sorted(todo):
            info = found.get(t)
            leader = (
                next((x.leader for x in info.partitions if x.partition == p), -1) if info else -1
            )
            leaders.setdefault(leader, []).append((t, p))
        retry: set[tuple[str, int]] = set(leaders.pop(-1, []))
        for leader, tps in leaders.items():
            resp = await admin.call(LIST_OFFSETS, _request(tps, timestamp), node=leader)
            for t in resp.topics:
                for p in t.partitions:
                    tp, e = (str(t.name), int(p.partition_index)), code(p.error_code)
                    if e in RETRIABLE:
                        retry.add(tp)
                    elif e:
                        print(
                            f"Skip getting offsets for topic-partition {tp[0]}-{tp[1]} due to "
                            f"error: {exception(e)}",
                            file=err,
                        )
                    else:
                        out[tp] = int(p.offset)
        todo = retry
        if not todo:
            break
        await asyncio.sleep(min(0.1 * 2**attempt, 1.0))
    for t, p in sorted(todo):
        print(
            f"Skip getting offsets for topic-partition {t}-{p} due to error: {exception(5)}",
            file=err,
        )
    return out


def _request(tps: list[tuple[str, int]], timestamp: int) -> dict[str, object]:
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                    for p in ps
                ],
            }
            for t, ps in topics.items()
        ],
    }


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.topic_partitions is not None and (args.topic is not None or args.partitions):
        raise terse("--topic-partitions cannot be used with --topic or --partitions")
    try:
        props = optional_config(args.command_config, "--command-config")
    except UsageError as e:
        raise terse(str(e)) from None
    props.setdefault("client.id", "GetOffsetShell")
    try:
        admin = await KafkaAdmin.open(args.bootstrap_server, props, "GetOffsetShell", "listTopics")
    except CommandError as e:
        raise terse(str(e)) from None
    try:
        lines = await fetch(admin, args, err)
    except CommandError as e:
        raise terse(str(e)) from None
    finally:
        admin.close()
    for line in lines:
        print(line, file=out)
    return 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        if not args.bootstrap_server:
            raise Usage('Missing required argument "[bootstrap-server]"')
        validate_bootstrap(args.bootstrap_server)
        return asyncio.run(_run(args, out, err))

    return TOOL.main(argv, out, err, start)


if __name__ == "__main__":
    sys.exit(main())
