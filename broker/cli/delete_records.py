"""``kafka-delete-records.sh``: delete the records of partitions below an offset, read from a JSON
file (``{"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}``; offset -1:
the high watermark), with Kafka 4.1's flags, output and exit codes (DeleteRecordsCommand): the
two progress lines, then ``partition: t-0\\tlow_watermark: 5`` or ``partition: t-0\\terror: ...``
per partition, in the order Kafka's HashMap gives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

from broker.cli.admin import CommandError, UsageError, code, optional_config
from broker.cli.java_order import hash_order, topic_partition_hash
from broker.cli.jopt import Fatal, Option, Tool, Usage
from broker.cli.kafka_admin import KafkaAdmin, exception

DELETE_RECORDS: Final = 21
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 3, 5
RETRIABLE: Final = frozenset({5, 6})
REQUEST_TIMEOUT_MS: Final = 30_000

OPTIONS: Final[list[Option]] = [
    ("bootstrap-server", ("String", "server(s) to use for bootstrapping"), False,
     "REQUIRED: The server to connect to."),
    ("command-config", ("String", "command config property file path"), False,
     "A property file containing configs to be passed to Admin Client."),
    ("help", None, False, "Print usage information."),
    ("offset-json-file", ("String", "Offset json file path"), False,
     "REQUIRED: The JSON file with offset per partition. The format to use is:\n"
     '{"partitions":\n  [{"topic": "foo", "partition": 1, "offset": 1}],\n "version":1\n}'),
    ("version", None, False, "Display Kafka version."),
]  # fmt: skip

TOOL: Final = Tool(
    intro="This tool helps to delete records of the given partitions down to the specified offset.",
    options=OPTIONS,
    parse_failure=Fatal,
)

TP = tuple[str, int]


def _field(obj: dict[str, Any], name: str, kind: type, label: str) -> Any:
    if name not in obj:
        raise Fatal(f"No such field exists: `{name}`")
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise Fatal(f"Expected `{label}` value, received {json.dumps(value)}")
    return value


def parse_offsets(text: str) -> dict[TP, int]:
    """The file's partitions and offsets; a partition given twice is refused."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise Fatal("The input string is not a valid JSON") from None
    if not isinstance(doc, dict):
        raise Fatal("The input string is not a valid JSON")
    version = _field(doc, "version", int, "int") if "version" in doc else 1
    if version != 1:
        raise Fatal(f"Not supported version field value {version}")
    if "partitions" not in doc:
        raise Fatal("Missing partitions field")
    parts = doc["partitions"]
    if not isinstance(parts, list):
        raise Fatal(f"Expected JSON array, received {json.dumps(parts)}")
    seen: dict[TP, list[int]] = {}
    for p in parts:
        if not isinstance(p, dict):
            raise Fatal(f"Expected JSON object, received {json.dumps(p)}")
        tp = (_field(p, "topic", str, "string"), _field(p, "partition", int, "int"))
        seen.setdefault(tp, []).append(_field(p, "offset", int, "long"))
    dups = [tp for tp, offsets in seen.items() if len(offsets) > 1]
    if dups:
        raise Fatal(
            "Offset json file contains duplicate topic partitions: "
            + ",".join(f"{t}-{p}" for t, p in dups)
        )
    return {tp: offsets[0] for tp, offsets in seen.items()}


async def delete(admin: KafkaAdmin, offsets: dict[TP, int]) -> dict[TP, str]:
    """DeleteRecords on each partition's leader: ``low_watermark: N`` or ``error: ...``."""
    results: dict[TP, str] = {}
    todo = dict(offsets)
    for attempt in range(20):
        found = await admin.metadata(sorted({t for t, _ in todo}))
        by_leader: dict[int, list[TP]] = {}
        for tp in todo:
            info = found.get(tp[0])
            part = (
                next((p for p in info.partitions if p.partition == tp[1]), None) if info else None
            )
            if part is None:
                results[tp] = f"error: {exception(UNKNOWN_TOPIC_OR_PARTITION)}"
            else:
                by_leader.setdefault(part.leader, []).append(tp)
        retry = {tp: todo[tp] for tp in by_leader.pop(-1, [])}
        for leader, tps in by_leader.items():
            resp = await admin.call(DELETE_RECORDS, _request(tps, todo), node=leader)
            for t in resp.topics:
                for p in t.partitions:
                    tp, e = (str(t.name), int(p.partition_index)), code(p.error_code)
                    if e in RETRIABLE:
                        retry[tp] = todo[tp]
                    elif e:
                        results[tp] = f"error: {exception(e)}"
                    else:
                        results[tp] = f"low_watermark: {int(p.low_watermark)}"
        todo = retry
        if not todo:
            break
        await asyncio.sleep(min(0.1 * 2**attempt, 1.0))
    for tp in todo:
        results[tp] = f"error: {exception(LEADER_NOT_AVAILABLE)}"
    return results


def _request(tps: list[TP], offsets: dict[TP, int]) -> dict[str, Any]:
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    return {
        "topics": [
            {
                "name": t,
                "partitions": [{"partition_index": p, "offset": offsets[(t, p)]} for p in ps],
            }
            for t, ps in topics.items()
        ],
        "timeout": REQUEST_TIMEOUT_MS,
    }


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        props = optional_config(args.command_config, "--command-config")
    except UsageError as e:
        raise Fatal(str(e)) from None
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        raise Fatal(args.offset_json_file) from None  # Java's NoSuchFileException: the path
    try:
        admin = await KafkaAdmin.open(args.bootstrap_server, props, "adminclient", "metadata")
    except CommandError as e:
        raise Fatal(str(e)) from None
    try:
        offsets = parse_offsets(text)
        print("Executing records delete operation", file=out)
        results = await delete(admin, offsets)
    except CommandError as e:
        raise Fatal(str(e)) from None
    finally:
        admin.close()
    print("Records delete operation completed:", file=out)
    for t, p in hash_order(list(offsets), lambda tp: topic_partition_hash(*tp)):
        print(f"partition: {t}-{p}\t{results[(t, p)]}", file=out)
    return 0


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        for name in ("bootstrap_server", "offset_json_file"):
            if not getattr(args, name):
                raise Usage(f'Missing required argument "[{name.replace("_", "-")}]"')
        return asyncio.run(_run(args, out))

    return TOOL.main(argv, out, err, start)


if __name__ == "__main__":
    sys.exit(main())
