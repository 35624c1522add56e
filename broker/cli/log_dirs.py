"""``kafka-log-dirs.sh --describe``: each broker's log directories and the size, offset lag and
future flag of every replica in them, as Kafka 4.1's LogDirsCommand prints them: two progress
lines, then one line of JSON whose keys and lists come in the order Kafka's HashMaps give
(java_order.py), so output compared with Kafka's matches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

from broker.cli.admin import CommandError, UsageError, code, optional_config
from broker.cli.java_order import hash_order, string_hash, topic_partition_hash
from broker.cli.jopt import Failed, Fatal, Option, Tool, Usage
from broker.cli.kafka_admin import KafkaAdmin, error_info

DESCRIBE_LOG_DIRS: Final = 35

OPTIONS: Final[list[Option]] = [
    ("bootstrap-server", ("String", "The server(s) to use for bootstrapping"), False,
     "REQUIRED: the server(s) to use for bootstrapping"),
    ("broker-list", ("String", "Broker list"), False,
     'The list of brokers to be queried in the form "0,1,2". All brokers in the cluster will '
     "be queried if no broker list is specified (default: )"),
    ("command-config", ("String", "Admin client property file"), False,
     "Property file containing configs to be passed to Admin Client."),
    ("describe", None, False, "Describe the specified log directories on the specified brokers."),
    ("help", None, False, "Print usage information."),
    ("topic-list", ("String", "Topic list"), False,
     'The list of topics to be queried in the form "topic1,topic2,topic3". All topics will be '
     "queried if no topic list is specified (default: )"),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

TOOL: Final = Tool(
    intro="This tool helps to query log directory usage on the specified brokers.",
    options=OPTIONS,
    parse_failure=Fatal,
)


def _ordered(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A Java HashMap<String, Object> of these entries, as Jackson writes it."""
    return dict(hash_order(pairs, lambda kv: string_hash(kv[0])))


def _java_set(ids: set[int]) -> list[int]:
    return hash_order(sorted(ids), lambda i: i)


async def describe(admin: KafkaAdmin, args: argparse.Namespace, out: TextIO) -> None:
    topics = {t for t in (args.topic_list or "").split(",") if t}
    try:
        asked = {int(b) for b in (args.broker_list or "").split(",") if b}
    except ValueError as e:
        raise Fatal(f"For input string: {str(e).rsplit(': ', 1)[-1]}") from None
    cluster = await admin.live_brokers()
    missing = asked - cluster
    if missing:
        raise Fatal(
            "ERROR: The given brokers do not exist from --broker-list: "
            f"{_ids(missing)}. Current existent brokers: {_ids(cluster)}"
        )
    brokers = (asked or cluster) & cluster
    print("Querying brokers for log directories information", file=out)
    described: dict[int, list[dict[str, Any]]] = {}
    for broker in _java_set(brokers):
        resp = await admin.call(DESCRIBE_LOG_DIRS, {"topics": None}, node=broker)
        if code(resp.error_code):
            raise CommandError(f"{error_info(code(resp.error_code))[1]}")
        dirs = hash_order(list(resp.results), lambda d: string_hash(str(d.log_dir)))
        described[broker] = [_log_dir(d, topics) for d in dirs]
    print(f"Received log directory information from brokers {_ids(brokers)}", file=out)
    doc = _ordered(
        [
            ("version", 1),
            (
                "brokers",
                [
                    _ordered([("broker", b), ("logDirs", dirs)])
                    for b, dirs in ((b, described[b]) for b in _java_set(brokers))
                ],
            ),
        ]
    )
    print(json.dumps(doc, separators=(",", ":"), ensure_ascii=False), file=out)


def _log_dir(d: Any, topics: set[str]) -> dict[str, Any]:
    err = code(d.error_code)
    replicas = [
        (str(t.name), int(p.partition_index), p)
        for t in d.topics
        if not topics or str(t.name) in topics
        for p in t.partitions
    ]
    replicas = hash_order(replicas, lambda r: topic_partition_hash(r[0], r[1]))
    return _ordered(
        [
            ("logDir", str(d.log_dir)),
            ("error", f"org.apache.kafka.common.errors.{error_info(err)[0]}" if err else None),
            (
                "partitions",
                [
                    _ordered(
                        [
                            ("partition", f"{t}-{n}"),
                            ("size", int(p.partition_size)),
                            ("offsetLag", int(p.offset_lag)),
                            ("isFuture", bool(p.is_future_key)),
                        ]
                    )
                    for t, n, p in replicas
                ],
            ),
        ]
    )


def _ids(ids: set[int]) -> str:
    return ",".join(map(str, _java_set(ids)))


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        props = optional_config(args.command_config, "--command-config")
    except UsageError as e:
        raise Fatal(str(e)) from None
    props.setdefault("client.id", "log-dirs-tool")
    try:
        admin = await KafkaAdmin.open(
            args.bootstrap_server, props, "log-dirs-tool", "describeCluster"
        )
    except CommandError as e:
        raise Failed(str(e)) from None
    try:
        await describe(admin, args, out)
    except CommandError as e:
        raise Failed(str(e)) from None
    finally:
        admin.close()
    return 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        for name in ("bootstrap_server", "describe"):
            if not getattr(args, name):
                raise Usage(f'Missing required argument "[{name.replace("_", "-")}]"')
        return asyncio.run(_run(args, out))

    return TOOL.main(argv, out, err, start)


if __name__ == "__main__":
    sys.exit(main())
