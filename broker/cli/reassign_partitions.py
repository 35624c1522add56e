"""``kafka-reassign-partitions.sh``: move partitions between brokers, with Apache Kafka's flags,
JSON files and output lines.

Actions (exactly one): ``--generate`` (a candidate plan for the topics of
``--topics-to-move-json-file`` over ``--broker-list``; nothing is changed), ``--execute`` and
``--cancel`` and ``--verify`` (the plan of ``--reassignment-json-file``), ``--list`` (the ongoing
reassignments). ``--bootstrap-server`` is required; ``--command-config`` holds the connection's
properties (security.protocol, ssl.*, sasl.*, request.timeout.ms). The requests
(AlterPartitionReassignments, ListPartitionReassignments) go to the broker the tool connects to,
which forwards them to the active controller.

The plan, as Kafka's tool reads and writes it::

    {"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [1, 2],
                                   "log_dirs": ["any", "any"]}]}

``log_dirs`` is optional; kmirror has one log directory per node, so only ``"any"`` is accepted.
Likewise there are no replication throttles: ``--throttle`` and ``--replica-alter-log-dirs-throttle``
are refused with a clear error; ``--preserve-throttles`` and ``--timeout`` are accepted and have
nothing to do. ``--bootstrap-controller`` is not supported.

Exit codes as Kafka's tool: 0 when the action ran (``--verify`` of a reassignment still in
progress included), 1 for a bad invocation or plan, or a refused change.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
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
from broker.controller.topics import assign_replicas

TOOL: Final = "kafka-reassign-partitions.sh"
METADATA: Final = 3
ALTER_REASSIGNMENTS: Final = 45
LIST_REASSIGNMENTS: Final = 46
REQUEST_TIMEOUT_MS: Final = 30_000
ANY_LOG_DIR: Final = "any"
ACTIONS: Final = ("generate", "execute", "verify", "cancel", "list")

# Kafka's required and permitted options per action (ReassignPartitionsCommand)
REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    "verify": ("reassignment-json-file",),
    "generate": ("topics-to-move-json-file", "broker-list"),
    "execute": ("reassignment-json-file",),
    "cancel": ("reassignment-json-file",),
    "list": (),
}
PERMITTED: Final[dict[str, tuple[str, ...]]] = {
    "verify": ("bootstrap-server", "command-config", "preserve-throttles"),
    "generate": ("bootstrap-server", "broker-list", "command-config", "disable-rack-aware"),
    "execute": (
        "additional",
        "bootstrap-server",
        "command-config",
        "throttle",
        "replica-alter-log-dirs-throttle",
        "timeout",
        "disallow-replication-factor-change",
    ),
    "cancel": ("bootstrap-server", "command-config", "preserve-throttles", "timeout"),
    "list": ("bootstrap-server", "command-config"),
}

CANNOT_EXECUTE: Final = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment."
)

HELP = """\
usage: kafka-reassign-partitions.sh --bootstrap-server HOST:PORT
           (--generate --topics-to-move-json-file FILE --broker-list IDS |
            --execute --reassignment-json-file FILE | --verify --reassignment-json-file FILE |
            --cancel --reassignment-json-file FILE | --list) [--command-config FILE]

This tool helps to move topic partitions between replicas.

actions (exactly one):
  --generate                      Generate a candidate partition reassignment configuration.
                                  It only generates a candidate assignment, it does not
                                  execute it.
  --execute                       Kick off the reassignment as specified by the
                                  --reassignment-json-file option.
  --verify                        Verify if the reassignment completed as specified by the
                                  --reassignment-json-file option.
  --cancel                        Cancel an active reassignment.
  --list                          List all active partition reassignments.

options:
  --bootstrap-server HOST:PORT    The server(s) to use for bootstrapping. Required.
  --command-config FILE           Property file for the connection (security.protocol,
                                  ssl.*, sasl.*, request.timeout.ms).
  --reassignment-json-file FILE   The partition reassignment configuration:
                                  {"partitions": [{"topic": "foo", "partition": 1,
                                    "replicas": [1,2,3], "log_dirs": ["any","any","any"]}],
                                   "version": 1}
                                  "log_dirs" is optional (only "any" is supported).
  --topics-to-move-json-file FILE The topics whose partitions --generate moves to the brokers
                                  of --broker-list: {"topics": [{"topic": "foo"},
                                  {"topic": "foo1"}], "version": 1}
  --broker-list IDS               The brokers to reassign to, as "0,1,2" (with --generate).
  --additional                    Execute this reassignment in addition to any ongoing ones.
  --disallow-replication-factor-change
                                  Refuse to change a partition's replication factor as part
                                  of this reassignment.
  --disable-rack-aware            Disable rack aware replica assignment (with --generate).
  --preserve-throttles            Do not modify broker or topic throttles (there are none).
  --timeout MS                    Accepted for compatibility (log directory moves only).
  --throttle BYTES/S, --replica-alter-log-dirs-throttle BYTES/S
                                  Not supported: kmirror has no replication throttles.
  --help                          Print this help.
  --version                       Print the version.
"""

Plan = list[tuple[tuple[str, int], list[int]]]  # ((topic, partition), target replicas)


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="kafka-reassign-partitions", add_help=False, allow_abbrev=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--version", action="store_true")
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    for flag in (
        "bootstrap-server",
        "bootstrap-controller",
        "command-config",
        "reassignment-json-file",
        "topics-to-move-json-file",
        "broker-list",
        "throttle",
        "replica-alter-log-dirs-throttle",
        "timeout",
    ):
        p.add_argument(f"--{flag}")
    for flag in (
        "additional",
        "preserve-throttles",
        "disallow-replication-factor-change",
        "disable-rack-aware",
    ):
        p.add_argument(f"--{flag}", action="store_true")
    return p


def _given(args: argparse.Namespace) -> list[str]:
    """The options on the command line, by their flag names (without the dashes)."""
    return [
        name.replace("_", "-") for name, value in vars(args).items() if value not in (None, False)
    ]


def validate(args: argparse.Namespace) -> str:
    """Kafka's checks, in its order; the action."""
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS)
        )
    action = actions[0]
    if args.bootstrap_controller is not None:
        raise UsageError("--bootstrap-controller is not supported; use --bootstrap-server")
    if args.bootstrap_server is None:
        raise UsageError("Please specify either --bootstrap-server or --bootstrap-controller")
    given = _given(args)
    for required in REQUIRED[action]:
        if required not in given:
            raise UsageError(f'Missing required argument "[{required}]"')
    for opt in given:
        if opt in ("help", "version", action) or opt in REQUIRED[action]:
            continue
        if opt not in PERMITTED[action]:
            raise UsageError(f'Option "[{opt}]" can\'t be used with action "[{action}]"')
    for flag in ("throttle", "replica-alter-log-dirs-throttle"):
        value = getattr(args, flag.replace("-", "_"))
        if value is not None and value.strip() != "-1":
            raise UsageError(f"--{flag} is not supported: kmirror has no replication throttles")
    if args.timeout is not None and not args.timeout.strip().lstrip("-").isdigit():
        raise UsageError(f"--timeout: '{args.timeout}' is not a number of milliseconds")
    return action


# --- the JSON files -------------------------------------------------------------------------


def _read_json(path: str, flag: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {flag} {path}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not valid JSON: {e}") from None


def _version(data: Any, path: str) -> None:
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the JSON must be an object")
    version = data.get("version", 1)
    if version != 1:
        raise UsageError(f"{path}: Not supported version field value {version}")


def parse_plan(data: Any, path: str) -> Plan:
    """A reassignment JSON (--execute, --verify, --cancel) with Kafka's checks and messages."""
    _version(data, path)
    entries = data.get("partitions", [])
    if not isinstance(entries, list):
        raise UsageError(f'{path}: "partitions" must be a list')
    plan: Plan = []
    for i, e in enumerate(entries):
        where = f"{path}: partitions[{i}]"
        if not isinstance(e, dict):
            raise UsageError(f"{where} must be an object")
        topic, partition, replicas = e.get("topic"), e.get("partition"), e.get("replicas")
        if not isinstance(topic, str):
            raise UsageError(f'{where}: "topic" must be a string')
        if type(partition) is not int:
            raise UsageError(f'{where}: "partition" must be an integer')
        if not isinstance(replicas, list) or any(type(r) is not int for r in replicas):
            raise UsageError(f'{where}: "replicas" must be a list of broker ids')
        log_dirs = e.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or any(not isinstance(d, str) for d in log_dirs):
            raise UsageError(f'{where}: "log_dirs" must be a list of strings')
        if len(log_dirs) != len(replicas):
            raise UsageError(
                f"Size of replicas list {_jlist(replicas)} is different from size of log dirs "
                f"list {_jlist(log_dirs)} for partition {topic}-{partition}"
            )
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise UsageError(
                f'{where}: log directory moves are not supported (only "any" in "log_dirs")'
            )
        plan.append(((topic, partition), list(replicas)))
    return plan


def check_plan(plan: Plan) -> None:
    """What --execute refuses before asking anything (Kafka's parseExecuteAssignmentArgs)."""
    if not plan:
        raise UsageError("Partition reassignment list cannot be empty")
    if any(not replicas for _tp, replicas in plan):
        raise UsageError("Partition replica list cannot be empty")
    parts = [tp for tp, _r in plan]
    duplicates = sorted({tp for tp in parts if parts.count(tp) > 1})
    if duplicates:
        raise UsageError(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(_tp(tp) for tp in duplicates)
        )
    repeated = []
    for tp, replicas in plan:
        twice = sorted({r for r in replicas if replicas.count(r) > 1})
        if twice:
            repeated.append(f"{_tp(tp)} contains multiple entries for {','.join(map(str, twice))}")
    if repeated:
        raise UsageError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(repeated)
        )


def parse_topics(data: Any, path: str) -> list[str]:
    """A topics-to-move JSON (--generate)."""
    _version(data, path)
    entries = data.get("topics", [])
    if not isinstance(entries, list):
        raise UsageError(f'{path}: "topics" must be a list')
    topics = []
    for i, e in enumerate(entries):
        topic = e.get("topic") if isinstance(e, dict) else None
        if not isinstance(topic, str):
            raise UsageError(f'{path}: topics[{i}] must be {{"topic": <string>}}')
        topics.append(topic)
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise UsageError(
            f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}"
        )
    return topics


def parse_broker_list(value: str) -> list[int]:
    brokers = []
    for item in value.split(","):
        try:
            brokers.append(int(item.strip()))
        except ValueError:
            raise UsageError(f"--broker-list: '{item}' is not a broker id") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise UsageError(
            f"Broker list contains duplicate entries: {', '.join(map(str, duplicates))}"
        )
    return brokers


def plan_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, sorted by topic then partition."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "replicas": assignment[(t, p)],
                    "log_dirs": [ANY_LOG_DIR] * len(assignment[(t, p)]),
                }
                for t, p in sorted(assignment)
            ],
        },
        separators=(",", ":"),
    )


def _tp(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def _jlist(items: Sequence[Any]) -> str:
    return "[" + ", ".join(map(str, items)) + "]"


def _csv(items: Sequence[int]) -> str:
    return ",".join(map(str, items))


# --- talking to the cluster -----------------------------------------------------------------


class Cluster:
    def __init__(self, session: Session) -> None:
        self.s = session

    async def metadata(self, topics: Sequence[str] | None) -> tuple[set[int], dict[str, Any]]:
        """The broker ids and, for each topic found, its partitions' replicas (None: the topic
        is unknown)."""
        resp = await self.s.call(
            METADATA,
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        brokers = {int(b.node_id) for b in resp.brokers}
        found: dict[str, Any] = {}
        for t in resp.topics:
            if code(t.error_code) == 0:
                found[str(t.name)] = {
                    int(p.partition_index): [int(r) for r in p.replica_nodes] for p in t.partitions
                }
            elif code(t.error_code) != 3:  # UNKNOWN_TOPIC_OR_PARTITION: not found
                raise CommandError(
                    f"cannot describe topic {t.name}: {code_name(code(t.error_code))}"
                )
        return brokers, found

    async def reassignments(
        self, parts: Sequence[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """The ongoing reassignments: (replicas, adding, removing) by partition."""
        topics: dict[str, list[int]] = {}
        for t, p in parts or ():
            topics.setdefault(t, []).append(p)
        resp = await self.s.call(
            LIST_REASSIGNMENTS,
            {
                "timeout": REQUEST_TIMEOUT_MS,
                "topics": (
                    None
                    if parts is None
                    else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
                ),
            },
        )
        top = code(resp.error_code)
        if top:
            raise CommandError(
                f"listing the partition reassignments failed: {resp.error_message or code_name(top)}"
            )
        return {
            (str(t.name), int(p.partition_index)): (
                [int(r) for r in p.replicas],
                [int(r) for r in p.adding_replicas],
                [int(r) for r in p.removing_replicas],
            )
            for t in resp.topics
            for p in t.partitions
        }

    async def alter(
        self,
        targets: Sequence[tuple[tuple[str, int], list[int] | None]],
        allow_rf_change: bool = True,
    ) -> dict[tuple[str, int], str]:
        """Start (replicas) or cancel (None) reassignments; the errors by partition."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), replicas in targets:
            topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        resp = await self.s.call(
            ALTER_REASSIGNMENTS,
            {
                "timeout": REQUEST_TIMEOUT_MS,
                "allow_replication_factor_change": allow_rf_change,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        errors = {}
        for t in resp.responses:
            for p in t.partitions:
                c = code(p.error_code)
                if c:
                    errors[(str(t.name), int(p.partition_index))] = p.error_message or code_name(c)
        top = code(resp.error_code)
        if top and not errors:
            raise CommandError(resp.error_message or code_name(top))
        return errors


# --- the actions ----------------------------------------------------------------------------


async def execute(c: Cluster, plan: Plan, args: argparse.Namespace, out: TextIO) -> int:
    if not args.additional and await c.reassignments():
        print(CANNOT_EXECUTE, file=out)
        return 1
    brokers, topics = await c.metadata(sorted({t for (t, _p), _r in plan}))
    unknown = next((b for _tp, rs in plan for b in rs if b not in brokers), None)
    if unknown is not None:
        raise CommandError(f"Unknown broker id {unknown}")
    current: dict[tuple[str, int], list[int]] = {}
    for (t, p), _r in plan:
        if t not in topics or p not in topics[t]:
            raise CommandError(f"Unable to find partition: {t}-{p}")
        current[(t, p)] = topics[t][p]
    print("Current partition replica assignment\n", file=out)
    print(plan_json(current) + "\n", file=out)
    print("Save this to use as the --reassignment-json-file option during rollback", file=out)
    errors = await c.alter(
        [(tp, replicas) for tp, replicas in plan], not args.disallow_replication_factor_change
    )
    if errors:
        print("Error reassigning partition(s):", file=out)
        for tp in sorted(errors):
            print(f"{_tp(tp)}: {errors[tp]}", file=out)
        return 1
    names = sorted(tp for tp, _r in plan)
    plural = "" if len(names) == 1 else "s"
    print(
        f"Successfully started partition reassignment{plural} for {','.join(map(_tp, names))}",
        file=out,
    )
    return 0


async def verify(c: Cluster, plan: Plan, out: TextIO) -> int:
    ongoing = await c.reassignments()
    _brokers, topics = await c.metadata(
        sorted({t for (t, _p), _r in plan if (t, _p) not in ongoing})
    )
    print("Status of partition reassignment:", file=out)
    for tp, target in sorted(plan):
        if tp in ongoing:
            print(f"Reassignment of partition {_tp(tp)} is still in progress.", file=out)
            continue
        current = topics.get(tp[0], {}).get(tp[1], [])
        if current == target:
            print(f"Reassignment of partition {_tp(tp)} is completed.", file=out)
        else:
            print(
                f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                f"{_csv(current)} rather than {_csv(target)}.",
                file=out,
            )
    return 0


async def cancel(c: Cluster, plan: Plan, out: TextIO) -> int:
    asked = sorted({tp for tp, _r in plan})
    ongoing = sorted(
        tp
        for tp, (_r, adding, removing) in (await c.reassignments(asked)).items()
        if adding or removing
    )
    if not ongoing:
        print("None of the specified partition reassignments are active.", file=out)
        return 0
    errors = await c.alter([(tp, None) for tp in ongoing])
    if errors:
        plural = "" if len(errors) == 1 else "s"
        print(f"Error cancelling partition reassignment{plural} for:", file=out)
        for tp in sorted(errors):
            print(f"{_tp(tp)}: {errors[tp]}", file=out)
        return 1
    plural = "" if len(ongoing) == 1 else "s"
    print(
        f"Successfully cancelled partition reassignment{plural} for: {','.join(map(_tp, ongoing))}",
        file=out,
    )
    return 0


async def list_reassignments(c: Cluster, out: TextIO) -> int:
    ongoing = await c.reassignments()
    if not ongoing:
        print("No partition reassignments found.", file=out)
        return 0
    print("Current partition reassignments:", file=out)
    for tp in sorted(ongoing):
        replicas, adding, removing = ongoing[tp]
        line = f"{_tp(tp)}: replicas: {_csv(replicas)}."
        if adding:
            line += f" adding: {_csv(adding)}."
        if removing:
            line += f" removing: {_csv(removing)}."
        print(line, file=out)
    return 0


async def generate(c: Cluster, topics: list[str], wanted: list[int], out: TextIO) -> int:
    brokers, found = await c.metadata(topics)
    missing = [t for t in topics if t not in found]
    if missing:
        raise CommandError(f"Topic {missing[0]} not found")
    usable = [b for b in wanted if b in brokers]
    current: dict[tuple[str, int], list[int]] = {}
    proposed: dict[tuple[str, int], list[int]] = {}
    for t in topics:
        parts = found[t]
        for p, replicas in parts.items():
            current[(t, p)] = replicas
        rf = len(next(iter(parts.values()), []))
        if rf > len(usable):
            raise CommandError(
                f"The target replication factor of {rf} cannot be reached because only "
                f"{len(usable)} broker(s) are registered."
            )
        start = random.randrange(len(usable)) if usable else 0
        for p, replicas in assign_replicas(usable, range(len(parts)), rf, start).items():
            proposed[(t, p)] = replicas
    print(f"Current partition replica assignment\n{plan_json(current)}\n", file=out)
    print(f"Proposed partition reassignment configuration\n{plan_json(proposed)}", file=out)
    return 0


# --- main -----------------------------------------------------------------------------------


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    action = validate(args)
    addresses = servers(args.bootstrap_server)
    props = optional_config(args.command_config, "--command-config")
    # the files are read and checked before connecting: a bad plan needs no cluster
    plan: Plan = []
    topics: list[str] = []
    wanted: list[int] = []
    if action in ("execute", "verify", "cancel"):
        path = args.reassignment_json_file
        plan = parse_plan(_read_json(path, "--reassignment-json-file"), path)
        if action == "execute":
            check_plan(plan)
    elif action == "generate":
        wanted = parse_broker_list(args.broker_list)
        path = args.topics_to_move_json_file
        topics = parse_topics(_read_json(path, "--topics-to-move-json-file"), path)
    session = await Session.open(addresses, props, "reassign-partitions-tool", "the cluster")
    c = Cluster(session)
    try:
        if action == "execute":
            return await execute(c, plan, args, out)
        if action == "verify":
            return await verify(c, plan, out)
        if action == "cancel":
            return await cancel(c, plan, out)
        if action == "generate":
            return await generate(c, topics, wanted, out)
        return await list_reassignments(c, out)
    finally:
        session.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    def start(args: argparse.Namespace) -> int:
        return asyncio.run(_run(args, out))

    return run_main(
        argv, out, err, parser=_parser(), help_text=HELP, tool=TOOL,
        what="reassign partitions", start=start,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
