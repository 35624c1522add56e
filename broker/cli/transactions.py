"""``kafka-transactions.sh``: list, describe, describe-producers, abort and find-hanging, with
Apache Kafka 4.1's TransactionsCommand flags, tables (``prettyPrintTable``: each column as wide
as its widest value, every value followed by a tab) and messages ("Failed to ...: <why>. Enable
debug logging for additional detail.", exit 1).

The requests are the admin client's: ListTransactions (66) to every broker, FindCoordinator +
DescribeTransactions (65) for a transactional id, DescribeProducers (61) to a partition's leader
(or ``--broker-id``), and for abort (KIP-664) WriteTxnMarkers (27) to the leader with the
producer's id and epoch: the ABORT marker closes the hanging transaction. find-hanging looks for
open transactions older than ``--max-transaction-timeout`` minutes whose producer the
coordinators no longer know or whose transaction no longer holds that partition.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

from broker.cli.admin import CommandError, Session, UsageError, code, optional_config, version
from broker.cli.cluster_admin import addresses
from broker.cli.kafka_args import KafkaParser
from broker.cli.tool_exit import parse_and_run

METADATA, FIND_COORDINATOR, WRITE_TXN_MARKERS = 3, 10, 27
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
TXN_KEY: Final = 1
TOOL: Final = "kafka-transactions.sh"

# error code -> Kafka's exception message (Errors' default), as the admin client reports it
_MESSAGES: Final[dict[int, str]] = {
    3: "This server does not host this topic-partition.",
    6: "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.",
    15: "The coordinator is not available.",
    16: "This is not the correct coordinator.",
    31: "Cluster authorization failed.",
    53: "Transactional Id authorization failed.",
    105: "The transactionalId could not be found.",
}


class Failed(Exception):
    """printErrorAndExit: the message on stderr, exit 1."""


def failed(message: str, c: int, detail: str | None = None) -> Failed:
    why = detail or _MESSAGES.get(c, f"error code {c}")
    return Failed(f"{message}: {why}. Enable debug logging for additional detail.")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    for row in (headers, *rows):
        print("".join(v.ljust(w) + "\t" for v, w in zip(row, widths, strict=True)), file=out)


def _parser() -> argparse.ArgumentParser:
    p = KafkaParser(
        prog=TOOL,
        description="This tool is used to analyze the transactional state of producers in the "
        "cluster. It can be used to detect and recover from hanging transactions.",
    )
    p.add_argument("-v", "--version", action="version", version=version())
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="property file containing configs to be passed to admin client",
    )
    p.add_argument(
        "--bootstrap-server",
        metavar="host:port",
        required=True,
        help="hostname and port for the broker to connect to, in the form `host:port`  "
        "(multiple comma-separated entries can be given)",
    )
    sub = p.add_subparsers(
        dest="command", title="commands", metavar="COMMAND", parser_class=KafkaParser, required=True
    )
    ls = sub.add_parser("list", help="list transactions")
    ls.add_argument("--duration-filter", type=int, help="Duration (in millis) to filter by")
    d = sub.add_parser("describe", help="describe the state of an active transactional-id")
    d.add_argument("--transactional-id", required=True, help="transactional id")
    dp = sub.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    dp.add_argument("--broker-id", type=int, help="optional broker id")
    dp.add_argument("--topic", required=True, help="topic name")
    dp.add_argument("--partition", type=int, required=True, help="partition number")
    a = sub.add_parser(
        "abort", help="abort a hanging transaction (requires administrative privileges)"
    )
    a.add_argument("--topic", required=True, help="topic name")
    a.add_argument("--partition", type=int, required=True, help="partition number")
    a.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    a.add_argument("--producer-id", type=int, help="producer id")
    a.add_argument("--producer-epoch", type=int, help="producer epoch")
    a.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    f = sub.add_parser("find-hanging", help="find hanging transactions")
    f.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    f.add_argument(
        "--max-transaction-timeout", type=int, default=15, help="maximum transaction timeout"
    )
    f.add_argument("--topic", help="topic name to limit search to")
    f.add_argument("--partition", type=int, help="partition number")
    return p


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Producer:
    producer_id: int
    epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    start_offset: int  # -1: no open transaction


class Admin:
    def __init__(self, targets: list[tuple[str, int]], props: dict[str, str]) -> None:
        self.targets = targets
        self.props = props
        self._sessions: dict[tuple[str, int], Session] = {}
        self.brokers: dict[int, Broker] = {}
        self.partitions: dict[tuple[str, int], tuple[int, list[int]]] = {}
        self.topic_errors: dict[str, int] = {}

    async def _session(self, where: list[tuple[str, int]]) -> Session:
        key = where[0]
        if len(where) == 1 and key in self._sessions:
            return self._sessions[key]
        s = await Session.open(where, self.props, TOOL, "the cluster")
        self._sessions[(s.conn.host, s.conn.port)] = s
        return s

    async def on_broker(self, node_id: int) -> Session:
        b = self.brokers.get(node_id)
        if b is None:
            raise CommandError(f"broker {node_id} is not in the cluster's metadata")
        return await self._session([(b.host, b.port)])

    async def metadata(self, topics: list[str] | None) -> None:
        s = await self._session(self.targets)
        resp = await s.call(
            METADATA,
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        self.brokers = {
            int(b.node_id): Broker(int(b.node_id), str(b.host), int(b.port)) for b in resp.brokers
        }
        for t in resp.topics:
            if code(t.error_code):
                self.topic_errors[str(t.name)] = code(t.error_code)
                continue
            for p in t.partitions:
                self.partitions[(str(t.name), int(p.partition_index))] = (
                    int(p.leader_id),
                    [int(r) for r in p.replica_nodes],
                )

    async def producers(
        self, tps: list[tuple[str, int]], broker_id: int | None
    ) -> dict[tuple[str, int], list[Producer] | int]:
        """Per partition: its active producers, or an error code."""
        out: dict[tuple[str, int], list[Producer] | int] = {}
        by_node: dict[int, list[tuple[str, int]]] = {}
        for tp in tps:
            if broker_id is not None:
                by_node.setdefault(broker_id, []).append(tp)
            elif tp in self.partitions and self.partitions[tp][0] >= 0:
                by_node.setdefault(self.partitions[tp][0], []).append(tp)
            else:
                out[tp] = 3 if tp not in self.partitions else 5  # unknown / leader not available
        for node, group in by_node.items():
            topics: dict[str, list[int]] = {}
            for t, p in group:
                topics.setdefault(t, []).append(p)
            s = await self.on_broker(node)
            resp = await s.call(
                DESCRIBE_PRODUCERS,
                {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]},
            )
            for t in resp.topics:
                for p in t.partitions:
                    tp = (str(t.name), int(p.partition_index))
                    c = code(p.error_code)
                    out[tp] = c or [
                        Producer(
                            int(a.producer_id),
                            int(a.producer_epoch),
                            int(a.coordinator_epoch),
                            int(a.last_sequence),
                            ms(a.last_timestamp),
                            int(a.current_txn_start_offset),
                        )
                        for a in p.active_producers
                    ]
        return out

    async def list_transactions(
        self, duration_ms: int | None, producer_ids: Sequence[int] = ()
    ) -> list[tuple[int, Any]]:
        rows: list[tuple[int, Any]] = []
        for node in sorted(self.brokers):
            s = await self.on_broker(node)
            resp = await s.call(
                LIST_TRANSACTIONS,
                {
                    "state_filters": [],
                    "producer_id_filters": list(producer_ids),
                    "duration_filter": -1 if duration_ms is None else duration_ms,
                },
            )
            if code(resp.error_code):
                raise failed("Failed to list transactions", code(resp.error_code))
            rows += [(node, t) for t in resp.transaction_states]
        return rows

    async def describe_transaction(self, tid: str) -> Any:
        """The DescribeTransactions state of ``tid``; raises Failed-ready (code, None)."""
        s = await self._session(self.targets)
        resp = await s.call(FIND_COORDINATOR, {"key_type": TXN_KEY, "coordinator_keys": [tid]})
        coord = resp.coordinators[0]
        if code(coord.error_code):
            return code(coord.error_code), None
        cs = await self._session([(str(coord.host), int(coord.port))])
        d = await cs.call(DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]})
        state = d.transaction_states[0]
        if code(state.error_code):
            return code(state.error_code), None
        return int(coord.node_id), state

    def close(self) -> None:
        for s in self._sessions.values():
            s.close()


async def _list(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    await admin.metadata([])
    rows = await admin.list_transactions(args.duration_filter)
    table(
        ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
        [
            (str(t.transactional_id), str(node), str(t.producer_id), str(t.transaction_state))
            for node, t in rows
        ],
        out,
    )


async def _describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    tid = args.transactional_id
    coordinator, state = await admin.describe_transaction(tid)
    if state is None:
        raise failed(
            f"Failed to describe transaction state of transactional-id `{tid}`", coordinator
        )
    start = ms(state.transaction_start_time)
    started, duration = ("None", "None") if start < 0 else (str(start), str(_now_ms() - start))
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    table(
        (
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ),
        [
            (
                str(coordinator),
                tid,
                str(state.producer_id),
                str(state.producer_epoch),
                str(state.transaction_state),
                str(ms(state.transaction_timeout)),
                started,
                duration,
                partitions,
            )
        ],
        out,
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


def ms(value: Any) -> int:
    """A timestamp or duration field as milliseconds (the codec gives datetimes/timedeltas)."""
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


async def _describe_producers(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    tp = (args.topic, args.partition)
    await admin.metadata([args.topic])
    where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
    result = (await admin.producers([tp], args.broker_id))[tp]
    if isinstance(result, int):
        raise failed(
            f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}", result
        )
    table(
        (
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ),
        [
            (
                str(p.producer_id),
                str(p.epoch),
                str(p.coordinator_epoch),
                str(p.last_sequence),
                str(p.last_timestamp),
                str(p.start_offset) if p.start_offset >= 0 else "None",
            )
            for p in result
        ],
        out,
    )


async def _abort(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise Failed(
            "The transaction to abort must be identified either with --start-offset (for "
            "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
            "--coordinator-epoch (for older brokers)"
        )
    await admin.metadata([args.topic])
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise Failed("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise Failed("Missing required argument --coordinator-epoch")
        pid, epoch, coord_epoch = (
            args.producer_id,
            args.producer_epoch,
            max(0, args.coordinator_epoch),
        )
    else:
        found = (await admin.producers([tp], None))[tp]
        if isinstance(found, int):
            raise failed(f"Failed to validate producer state for partition {tp[0]}-{tp[1]}", found)
        match = next((p for p in found if p.start_offset == args.start_offset), None)
        if match is None:
            raise Failed(
                f"Could not find any open transactions starting at offset {args.start_offset} "
                f"on partition {tp[0]}-{tp[1]}"
            )
        pid, epoch, coord_epoch = match.producer_id, match.epoch, max(0, match.coordinator_epoch)
    spec = (
        f"AbortTransactionSpec(topicPartition={tp[0]}-{tp[1]}, producerId={pid}, "
        f"producerEpoch={epoch}, coordinatorEpoch={coord_epoch})"
    )
    leader = admin.partitions.get(tp, (-1, []))[0]
    if leader < 0:
        raise failed(f"Failed to abort transaction {spec}", 3 if tp not in admin.partitions else 5)
    s = await admin.on_broker(leader)
    resp = await s.call(
        WRITE_TXN_MARKERS,
        {
            "markers": [
                {
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "transaction_result": False,
                    "topics": [{"name": tp[0], "partition_indexes": [tp[1]]}],
                    "coordinator_epoch": coord_epoch,
                }
            ]
        },
    )
    for m in resp.markers:
        for t in m.topics:
            for p in t.partitions:
                if code(p.error_code):
                    raise failed(f"Failed to abort transaction {spec}", code(p.error_code))


async def _find_hanging(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if args.topic is None and args.broker_id is None:
        raise Failed(
            "The `find-hanging` command requires either --topic or --broker-id to limit the "
            "scope of the search"
        )
    if args.partition is not None and args.topic is None:
        raise Failed("The --partition argument requires --topic to be provided")
    max_ms = args.max_transaction_timeout * 60_000
    await admin.metadata(None if args.topic is None else [args.topic])
    if args.topic is not None and args.topic in admin.topic_errors:
        raise failed("Failed to describe 1 topics", admin.topic_errors[args.topic])
    if args.partition is not None:
        tps = [(args.topic, args.partition)]
    else:
        tps = sorted(
            tp
            for tp, (_, replicas) in admin.partitions.items()
            if (args.topic is None or tp[0] == args.topic)
            and (args.broker_id is None or args.broker_id in replicas)
        )
    now = _now_ms()
    candidates: list[tuple[tuple[str, int], Producer]] = []
    for tp, result in (await admin.producers(tps, args.broker_id)).items():
        if isinstance(result, int):
            raise failed(
                f"Failed to describe producers for {len(tps)} partitions on broker "
                f"{'Optional.empty' if args.broker_id is None else f'Optional[{args.broker_id}]'}",
                result,
            )
        for p in result:
            if p.start_offset >= 0 and now - p.last_timestamp > max_ms:
                candidates.append((tp, p))
    hanging: list[tuple[tuple[str, int], Producer]] = []
    if candidates:
        pids = sorted({p.producer_id for _, p in candidates})
        tids = {
            int(t.producer_id): str(t.transactional_id)
            for _, t in await admin.list_transactions(None, pids)
        }
        states: dict[str, Any] = {}
        for known in set(tids.values()):
            _, states[known] = await admin.describe_transaction(known)
        for tp, p in candidates:
            tid = tids.get(p.producer_id)
            state = states.get(tid) if tid is not None else None
            held = (
                set()
                if state is None
                else {(t.topic, int(q)) for t in state.topics for q in t.partitions}
            )
            if tp not in held:
                hanging.append((tp, p))
    table(
        (
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ),
        [
            (
                tp[0],
                str(tp[1]),
                str(p.producer_id),
                str(p.epoch),
                str(p.coordinator_epoch),
                str(p.start_offset),
                str(p.last_timestamp),
                str((now - p.last_timestamp) // 60_000),
            )
            for tp, p in hanging
        ],
        out,
    )


_COMMANDS: Final = {
    "list": _list,
    "describe": _describe,
    "describe-producers": _describe_producers,
    "abort": _abort,
    "find-hanging": _find_hanging,
}


async def _run(args: argparse.Namespace, out: TextIO) -> None:
    try:
        props = optional_config(args.command_config, "--command-config")
    except UsageError as e:
        raise Failed(
            f"Failed to load admin client properties: {e}. Enable debug logging for additional detail."
        ) from None
    admin = Admin(addresses("--bootstrap-server", args.bootstrap_server), props)
    try:
        await _COMMANDS[args.command](admin, args, out)
    finally:
        admin.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    return parse_and_run(_parser(), _run, argv, out, err, (Failed,))


if __name__ == "__main__":
    sys.exit(main())
