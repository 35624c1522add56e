"""``kafka-leader-election.sh``: preferred or unclean leader elections, with Apache Kafka's flags
and result lines.

Flags: ``--bootstrap-server`` and ``--election-type PREFERRED|UNCLEAN`` (any case) are required;
exactly one of ``--topic`` (with ``--partition``), ``--all-topic-partitions`` and
``--path-to-json-file`` (``{"partitions": [{"topic": "t", "partition": 0}, ...]}``) says which
partitions; ``--admin.config`` holds the connection's properties (security.protocol, ssl.*,
sasl.*, request.timeout.ms). One ElectLeaders request goes to the broker the tool connects to,
which forwards it to the active controller.

Output, as Kafka's tool prints it: the partitions elected, the partitions that already had the
leader asked for (ELECTION_NOT_NEEDED), then one line per partition that failed; exit code 1 when
any failed or the request was refused, 0 otherwise. With ``--all-topic-partitions`` the
controller leaves out the partitions that needed no election.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

from broker.cli.admin import (
    CommandError,
    Parser,
    Session,
    UsageError,
    code,
    code_name,
    optional_config,
    run_main,
    servers,
)

ELECT_LEADERS: Final = 43
TOOL: Final = "kafka-leader-election.sh"
ELECTION_TYPES: Final = {"PREFERRED": 0, "UNCLEAN": 1}
ELECTION_NOT_NEEDED: Final = 84
CLUSTER_AUTHORIZATION_FAILED: Final = 31
REQUEST_TIMED_OUT: Final = 7
DEFAULT_TIMEOUT_MS: Final = 30_000  # the tool's admin timeout; requests get half of it

HELP = """\
usage: kafka-leader-election.sh --bootstrap-server HOST:PORT --election-type TYPE
                                (--topic TOPIC --partition ID | --all-topic-partitions |
                                 --path-to-json-file FILE) [--admin.config FILE]

Elects a new leader for a set of topic partitions: their preferred replica, or any live
replica when a partition has no leader.

options:
  --bootstrap-server HOST:PORT  Comma-separated host:port pairs of brokers. Required.
  --election-type TYPE          PREFERRED: elect the first replica of the assignment when it is
                                in sync and alive and does not lead yet. UNCLEAN: elect a live
                                replica, in sync or not, for partitions without a leader.
                                Required.
  --topic TOPIC                 The topic of the one partition to elect a leader for.
  --partition ID                The partition (required with --topic, only with --topic).
  --all-topic-partitions        Every partition of every topic.
  --path-to-json-file FILE      The partitions as JSON:
                                {"partitions": [{"topic": "foo", "partition": 1}, ...]}
  --admin.config FILE           Properties for the connection (security.protocol, ssl.*,
                                sasl.*, request.timeout.ms).
  --help                        Print this help.
  --version                     Print the version.
"""


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="kafka-leader-election", add_help=False, allow_abbrev=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--version", action="store_true")
    p.add_argument("--bootstrap-server")
    p.add_argument("--admin.config", dest="admin_config")
    p.add_argument("--path-to-json-file")
    p.add_argument("--topic")
    p.add_argument("--partition")
    p.add_argument("--all-topic-partitions", action="store_true")
    p.add_argument("--election-type")
    return p


Partitions = list[tuple[str, int]] | None  # None: every partition


def _validate(args: argparse.Namespace) -> tuple[int, Partitions]:
    """Kafka's checks, in its order: the election type and the partitions asked for."""
    missing = [
        flag
        for flag, value in (("--bootstrap-server", args.bootstrap_server),
                            ("--election-type", args.election_type))
        if value is None
    ]  # fmt: skip
    if missing:
        raise UsageError("Missing required option(s): " + ", ".join(missing))
    kind = ELECTION_TYPES.get(args.election_type.upper())
    if kind is None:
        raise UsageError(
            f"--election-type: '{args.election_type}' is not one of PREFERRED, UNCLEAN"
        )
    chosen = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise UsageError(
            "One and only one of the following options is required: "
            "--topic, --all-topic-partitions, --path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        raise UsageError("Missing required option(s): --partition")
    if args.topic is None and args.partition is not None:
        raise UsageError("Option --partition is only allowed if --topic is used")
    if args.topic is not None:
        return kind, [(args.topic, _partition_id(args.partition))]
    if args.path_to_json_file is not None:
        return kind, read_election_file(args.path_to_json_file)
    return kind, None


def _partition_id(value: str) -> int:
    try:
        pid = int(value)
    except ValueError:
        raise UsageError(f"--partition: '{value}' is not a partition id (an integer)") from None
    if pid < 0:
        raise UsageError(f"--partition: '{value}' is not a partition id (0 or more)")
    return pid


def read_election_file(path: str) -> list[tuple[str, int]]:
    """The partitions of a ``--path-to-json-file``; a UsageError says what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read --path-to-json-file {path}: {e.strerror or e}") from None
    if not text.strip():
        raise UsageError(f"{path}: Replica election data is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not JSON: {e}") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise UsageError(f'{path}: Replica election data is missing "partitions" field')
    entries = data["partitions"]
    if not isinstance(entries, list):
        raise UsageError(f'{path}: "partitions" must be a list')
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(entries):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or type(partition) is not int:
            raise UsageError(
                f'{path}: partitions[{i}] must be {{"topic": <string>, "partition": <integer>}}'
            )
        out.append((topic, partition))
    duplicates = sorted({tp for tp in out if out.count(tp) > 1})
    if duplicates:
        names = ", ".join(f"{t}-{p}" for t, p in duplicates)
        raise UsageError(f"{path}: Replica election data contains duplicate partitions: {names}")
    return out


def _request(kind: int, partitions: Partitions, timeout_ms: int) -> dict[str, Any]:
    topics: dict[str, list[int]] = {}
    for topic, pid in partitions or ():
        topics.setdefault(topic, []).append(pid)
    return {
        "election_type": kind,
        "topic_partitions": (
            None
            if partitions is None
            else [{"topic": t, "partitions": ids} for t, ids in topics.items()]
        ),
        "timeout": timeout_ms,
    }


def report(kind: int, resp: Any, out: TextIO) -> int:
    """Print the results as Kafka's tool does; the exit code."""
    name = "PREFERRED" if kind == 0 else "UNCLEAN"
    top = code(getattr(resp, "error_code", 0))
    if top == CLUSTER_AUTHORIZATION_FAILED:
        print("Not authorized to perform leader election", file=out)
        return 1
    if top == REQUEST_TIMED_OUT:
        print("Timeout waiting for election results", file=out)
        return 1
    if top:
        raise CommandError(f"the election request failed ({code_name(top)})")
    elected, noop, failed = [], [], []
    for t in resp.replica_election_results:
        for r in t.partition_result:
            tp, err = f"{t.topic}-{int(r.partition_id)}", code(r.error_code)
            if err == 0:
                elected.append(tp)
            elif err == ELECTION_NOT_NEEDED:
                noop.append(tp)
            else:
                failed.append((tp, code_name(err), r.error_message))
    if elected:
        print(
            f"Successfully completed leader election ({name}) for partitions " + ", ".join(elected),
            file=out,
        )
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(noop), file=out)
    for tp, err_name, message in failed:
        detail = f"{err_name}: {message}" if message else err_name
        print(f"Error completing leader election ({name}) for partition: {tp}: {detail}", file=out)
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    return 0


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    kind, partitions = _validate(args)
    addresses = servers(args.bootstrap_server)
    props = optional_config(args.admin_config, "--admin.config")
    try:
        timeout_ms = int(props.get("default.api.timeout.ms", str(DEFAULT_TIMEOUT_MS)))
    except ValueError:
        raise UsageError("default.api.timeout.ms in --admin.config is not a number") from None
    props.setdefault("request.timeout.ms", str(timeout_ms // 2))
    session = await Session.open(addresses, props, "kafka-leader-election", "the cluster")
    try:
        resp = await session.call(ELECT_LEADERS, _request(kind, partitions, timeout_ms // 2))
    finally:
        session.close()
    return report(kind, resp, out)


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        return asyncio.run(_run(args, out))

    return run_main(
        argv, out, err, parser=_parser(), help_text=HELP, tool=TOOL,
        what="leader election", start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
