"""The transaction RPC handlers: request checks, per-version error codes, and responses that
encode and decode back in every served version."""

import asyncio
import datetime
import struct
from dataclasses import dataclass, field
from typing import Any, cast

from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader

from broker.api.context import RequestContext
from broker.api.services import Services
from broker.api.txn import TxnApi
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.runtime import EndMarker, InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from broker.coordinator.txn import TransactionCoordinator, TxnConfig
from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY, body_bytes, decode_body

from .group_support import config

INIT, ADD_PARTITIONS, ADD_OFFSETS, END, MARKERS, TXN_COMMIT = 22, 24, 25, 26, 27, 28
DESCRIBE, LIST = 65, 66
OFFSETS_PARTITIONS = 3


@dataclass
class Topic:
    partitions: dict[int, object]


@dataclass
class Image:
    topics: dict[str, Topic] = field(default_factory=dict)


@dataclass
class FakeServices:
    img: Image
    read_only: set[str]
    authorizer: None = None  # no authorizer configured: every check allows

    def image(self) -> Image:
        return self.img

    def writable(self, topic: str, partition: int) -> bool:
        return topic not in self.read_only


@dataclass
class Markers:
    written: list[tuple[str, int, EndMarker]] = field(default_factory=list)

    async def write_marker(self, topic: str, partition: int, marker: EndMarker) -> E:
        self.written.append((topic, partition, marker))
        return E.none


def ctx(key: int, version: int) -> RequestContext:
    header = RequestHeader(
        api_key=key, api_version=version, correlation_id=1, client_id="t", header_version=2
    )
    return RequestContext(header=header, connection_id="c", listener="PLAINTEXT", peer_host="h")


def request(key: int, version: int, data: dict[str, Any]) -> Any:
    return build(REGISTRY.spec(key).request_type(version), data)


def round_trip(key: int, version: int, resp: Any) -> Any:
    """The response as a client decodes it."""
    cls = REGISTRY.spec(key).response_type(version)
    return decode_body(cls, body_bytes(resp), 0)


async def make_api() -> tuple[TxnApi, Markers]:
    sched = ManualScheduler()
    groups = GroupCoordinator(config(num_partitions=OFFSETS_PARTITIONS), sched)
    for p in range(OFFSETS_PARTITIONS):
        await groups.load(p, InMemoryRecordLog())
    markers = Markers()
    pid = [500]

    async def next_pid() -> int:
        pid[0] += 1
        return pid[0]

    txns = TransactionCoordinator(
        TxnConfig(num_partitions=2, end_txn_wait_ms=50),
        next_pid,
        markers,
        lambda g: ("__consumer_offsets", groups.partition_for(g)),
        sched,
    )
    for p in range(2):
        await txns.load(p, InMemoryRecordLog())
    image = Image(
        {
            "t": Topic({0: object(), 1: object()}),
            "m": Topic({0: object()}),
            "__consumer_offsets": Topic({p: object() for p in range(OFFSETS_PARTITIONS)}),
        }
    )
    services = cast(Services, FakeServices(image, read_only={"m"}))
    return TxnApi(services, txns, groups, markers), markers


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_init_producer_id_versions() -> None:
    async def body() -> None:
        api, _ = await make_api()
        for v in range(6):
            data: dict[str, Any] = {"transactional_id": f"tx{v}", "transaction_timeout": 60_000}
            resp = round_trip(
                INIT, v, await api.init_producer_id(ctx(INIT, v), request(INIT, v, data))
            )
            assert (resp.error_code, resp.producer_epoch) == (E.none, 0)
        plain = await api.init_producer_id(
            ctx(INIT, 4), request(INIT, 4, {"transactional_id": None, "transaction_timeout": 0})
        )
        assert plain.error_code == E.none and plain.producer_id > 0
        half = request(INIT, 3, {"transactional_id": "tx", "transaction_timeout": 1000,
                                 "producer_id": 5, "producer_epoch": -1})  # fmt: skip
        assert (await api.init_producer_id(ctx(INIT, 3), half)).error_code == E.invalid_request
        # a stale epoch is PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before
        first = await api.init_producer_id(
            ctx(INIT, 4), request(INIT, 4, {"transactional_id": "z", "transaction_timeout": 1000})
        )
        stale = {"transactional_id": "z", "transaction_timeout": 1000,
                 "producer_id": first.producer_id, "producer_epoch": 9}  # fmt: skip
        assert (await api.init_producer_id(ctx(INIT, 4), request(INIT, 4, stale))).error_code == (
            E.producer_fenced
        )
        assert (await api.init_producer_id(ctx(INIT, 3), request(INIT, 3, stale))).error_code == (
            E.invalid_producer_epoch
        )

    run(body())


def test_add_partitions_client_and_broker_paths() -> None:
    async def body() -> None:
        api, markers = await make_api()
        init = await api.txns.init_producer_id("tx", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch

        async def add(version: int, topics: list[tuple[str, list[int]]], e: int = epoch) -> Any:
            req = request(ADD_PARTITIONS, version, {
                "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": e,
                "v3_and_below_topics": [{"name": n, "partitions": ps} for n, ps in topics],
            })  # fmt: skip
            resp = await api.add_partitions_to_txn(ctx(ADD_PARTITIONS, version), req)
            resp = round_trip(ADD_PARTITIONS, version, resp)
            return {
                (t.name, int(p.partition_index)): int(p.partition_error_code)
                for t in resp.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }

        assert await add(3, [("t", [0])]) == {("t", 0): E.none}
        assert await add(3, [("t", [1]), ("nope", [0])]) == {
            ("t", 1): E.operation_not_attempted,
            ("nope", 0): E.unknown_topic_or_partition,
        }
        assert await add(3, [("t", [1, 7])]) == {
            ("t", 1): E.operation_not_attempted,
            ("t", 7): E.unknown_topic_or_partition,
        }
        assert (await add(0, [("__consumer_offsets", [0])]))[("__consumer_offsets", 0)] == (
            E.topic_authorization_failed
        )
        assert await add(2, [("m", [0])]) == {("m", 0): MirrorErrorCode.READ_ONLY_TOPIC}
        assert await add(2, [("t", [1])], e=epoch + 1) == {("t", 1): E.producer_fenced}
        assert await add(1, [("t", [1])], e=epoch + 1) == {("t", 1): E.invalid_producer_epoch}
        # v4+: batched, verify_only answers whether the partitions are in the transaction
        req = request(ADD_PARTITIONS, 5, {"transactions": [{
            "transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
            "verify_only": True, "topics": [{"name": "t", "partitions": [0, 1]}],
        }]})  # fmt: skip
        resp = round_trip(
            ADD_PARTITIONS, 5, await api.add_partitions_to_txn(ctx(ADD_PARTITIONS, 5), req)
        )
        (result,) = resp.results_by_transaction
        got = {
            int(p.partition_index): p.partition_error_code
            for t in result.topic_results
            for p in t.results_by_partition
        }
        assert got == {0: E.none, 1: E.transaction_abortable}
        assert markers.written == []

    run(body())


def test_offsets_commit_end_and_describe() -> None:
    async def body() -> None:
        api, markers = await make_api()
        init = await api.txns.init_producer_id("tx", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        commit_req = request(TXN_COMMIT, 3, {
            "transactional_id": "tx", "group_id": "g", "producer_id": pid,
            "producer_epoch": epoch, "generation_id": -1, "member_id": "",
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""},
                {"partition_index": 9, "committed_offset": 5, "committed_metadata": ""},
            ]}],
        })  # fmt: skip

        async def commit_errors(version: int) -> list[int]:
            resp = await api.txn_offset_commit(ctx(TXN_COMMIT, version), commit_req)
            resp = round_trip(TXN_COMMIT, 3, resp)
            return [int(p.error_code) for t in resp.topics for p in t.partitions]

        # not yet in the transaction (no AddOffsetsToTxn): refused, TRANSACTION_ABORTABLE is v4+
        assert await commit_errors(3) == [E.invalid_txn_state, E.unknown_topic_or_partition]
        assert await commit_errors(4) == [E.transaction_abortable, E.unknown_topic_or_partition]
        add = request(ADD_OFFSETS, 4, {"transactional_id": "tx", "producer_id": pid,
                                       "producer_epoch": epoch, "group_id": "g"})  # fmt: skip
        resp = round_trip(ADD_OFFSETS, 4, await api.add_offsets_to_txn(ctx(ADD_OFFSETS, 4), add))
        assert resp.error_code == E.none
        assert await commit_errors(3) == [E.none, E.unknown_topic_or_partition]

        describe = request(DESCRIBE, 0, {"transactional_ids": ["tx", "nope"]})
        resp = round_trip(DESCRIBE, 0, await api.describe_transactions(ctx(DESCRIBE, 0), describe))
        found, missing = resp.transaction_states
        assert (found.transaction_state, found.producer_id) == ("Ongoing", pid)
        assert found.transaction_timeout == datetime.timedelta(minutes=1)
        assert [(t.topic, list(t.partitions)) for t in found.topics] == [
            ("__consumer_offsets", [api.groups.partition_for("g")])
        ]
        assert missing.error_code == E.transactional_id_not_found
        # Kafka's answer for an unknown id keeps the schema defaults (start time 0, not -1),
        # which kio's native reader decodes
        raw = body_bytes(
            await api.describe_transactions(
                ctx(DESCRIBE, 0), request(DESCRIBE, 0, {"transactional_ids": ["nope"]})
            )
        )
        native, _ = entity_reader(REGISTRY.spec(DESCRIBE).response_type(0))(raw, 0)
        [state] = native.transaction_states
        assert state.error_code == E.transactional_id_not_found
        assert (state.transaction_start_time.timestamp(), state.producer_id) == (0, 0)

        end = request(END, 3, {"transactional_id": "tx", "producer_id": pid,
                               "producer_epoch": epoch, "committed": True})  # fmt: skip
        assert (await api.end_txn(ctx(END, 3), end)).error_code == E.none
        await api.txns.settle()
        assert [(t, m.commit) for t, _, m in markers.written] == [("__consumer_offsets", True)]

        listing = request(LIST, 2, {"state_filters": ["CompleteCommit", "Nope"],
                                    "producer_id_filters": [], "duration_filter": -1})  # fmt: skip
        resp = round_trip(LIST, 2, await api.list_transactions(ctx(LIST, 2), listing))
        assert list(resp.unknown_state_filters) == ["Nope"]
        assert [(t.transactional_id, t.transaction_state) for t in resp.transaction_states] == [
            ("tx", "CompleteCommit")
        ]
        # an Empty transaction's start time is -1 on the wire, as in Kafka
        await api.txns.init_producer_id("fresh", 60_000)
        resp = await api.describe_transactions(
            ctx(DESCRIBE, 0), request(DESCRIBE, 0, {"transactional_ids": ["fresh"]})
        )
        raw = body_bytes(resp)
        assert struct.pack(">q", -1) in raw

    run(body())


def test_write_txn_markers() -> None:
    async def body() -> None:
        api, markers = await make_api()
        req = request(MARKERS, 1, {"markers": [{
            "producer_id": 7, "producer_epoch": 2, "transaction_result": True,
            "coordinator_epoch": 4, "topics": [{"name": "t", "partition_indexes": [0, 1]}],
        }]})  # fmt: skip
        resp = round_trip(MARKERS, 1, await api.write_txn_markers(ctx(MARKERS, 1), req))
        (result,) = resp.markers
        assert [int(p.error_code) for t in result.topics for p in t.partitions] == [0, 0]
        assert [(t, p) for t, p, _ in markers.written] == [("t", 0), ("t", 1)]
        assert markers.written[0][2] == EndMarker(7, 2, 4, True)

    run(body())
