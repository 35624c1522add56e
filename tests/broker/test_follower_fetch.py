"""KIP-392 on real partitions and logs (a ReplicaManager per node, FetchApi over it).

A follower serves a v11+ consumer Fetch up to its own high watermark, never beyond; below v11
only the leader serves consumers. The leader with ``replica.selector.class`` names a follower
of the consumer's rack in ``preferred_read_replica`` (ISR members whose log covers the fetch
offset, on brokers reachable on the consumer's listener) and reads nothing; without a selector,
or for a consumer without a rack or in the leader's rack, it serves the records itself. The
current leader epoch is checked first on every replica (FENCED / UNKNOWN_LEADER_EPOCH).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.fetch import FOLLOWER_READ, FetchApi
from broker.api.services import Services
from broker.config.replica_selector_class import RACK_AWARE_SELECTOR
from broker.log import LogConfig, LogManager, ManualClock
from broker.metadata.image import MetadataImage, apply_records
from broker.replication.replica_manager import ReplicaManager
from protocol.build import build
from protocol.encoders.fetch_request import parse_fetch_request
from protocol.metadata_records import latest_type
from protocol.records import Record, build_batch
from protocol.registry import REGISTRY, body_bytes

E = ErrorCode
TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
RegisterBrokerRecord = latest_type("RegisterBrokerRecord")
T0 = 1_700_000_000_000
EPOCH = 3
RACKS = {1: "r1", 2: "r2", 3: "r3"}
TOPIC_ID = uuid.UUID(int=77)


def _records_of(
    leader: int, isr: tuple[int, ...] = (1, 2, 3), fenced: frozenset[int] = frozenset()
) -> list[Any]:
    """Three brokers in racks r1-r3 and t-0 on all three, led by ``leader``."""
    ep_cls = RegisterBrokerRecord.__dataclass_fields__["end_points"].type.__args__[0]
    records: list[Any] = [
        RegisterBrokerRecord(
            broker_id=b,
            incarnation_id=uuid.UUID(int=b),
            broker_epoch=10 + b,
            end_points=(ep_cls(name="PLAINTEXT", host="h", port=9000 + b, security_protocol=0),),
            features=(),
            rack=rack,
            fenced=b in fenced,
        )
        for b, rack in RACKS.items()
    ]
    records += [
        TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=(1, 2, 3),
            isr=isr,
            leader=leader,
            leader_epoch=EPOCH,
            partition_epoch=0,
        ),
    ]
    return records


@dataclass
class Ctx:
    api_version: int
    listener: str = "PLAINTEXT"


class Node:
    """One node's replica manager and Fetch API over a real log under ``path``."""

    def __init__(self, path: Path, node_id: int, records: list[Any], selector: str | None) -> None:
        self.clock = ManualClock(T0)
        self.rm = ReplicaManager(
            node_id, LogManager([path], LogConfig(), self.clock), lambda _t: LogConfig(), self.clock
        )
        self.image, delta = apply_records(MetadataImage(), list(enumerate(records, 1)))
        self.rm.apply_delta(self.image, delta)
        self.api = FetchApi(
            Services(
                node_id=node_id,
                cluster_id="c",
                image=lambda: self.image,
                controller=None,
                replicas=self.rm,
                log_manager=None,
                config=SimpleNamespace(replica_selector_class=selector),
                now_ms=self.clock.now_ms,
            )
        )
        self.follower_reads: list[int] = []
        self.preferred_answers = 0
        self.api.on_follower_read = self.follower_reads.append
        self.api.on_preferred_replica = self._count_preferred
        hosted = self.rm.get("t", 0)
        assert hosted is not None
        self.hosted = hosted

    def _count_preferred(self) -> None:
        self.preferred_answers += 1

    def fetch(
        self, offset: int, version: int = 12, rack: str = "", current_epoch: int = EPOCH
    ) -> dict[str, Any]:
        """One consumer Fetch of t-0 (max_wait 0): the partition's row."""
        req = build(
            REGISTRY.spec(1).request_type(version),
            {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "t",
                        "topic_id": TOPIC_ID,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": current_epoch,
                                "fetch_offset": offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": rack,
            },
        )
        view = parse_fetch_request(memoryview(body_bytes(req)), 0, version)
        _t, error, _s, topics = asyncio.run(self.api.fetch(Ctx(version), view))  # type: ignore[arg-type]
        assert error == 0
        [topic] = topics
        [row] = topic["partitions"]
        return row


def _batch(base: int, count: int) -> bytes:
    return build_batch(
        [Record(value=b"v%d" % i) for i in range(base, base + count)],
        base_offset=base,
        partition_leader_epoch=EPOCH,
        base_timestamp=T0,
    )


def _records(row: dict[str, Any]) -> int:
    records = row["records"]
    return sum(len(b) for b in records) if isinstance(records, list) else len(records)


def _follow(n: Node, replica: int, offset: int, epoch: int = EPOCH) -> None:
    """Follower ``replica`` fetched at ``offset`` (the leader records its position)."""
    served = n.hosted.on_follower_fetch(
        replica,
        offset,
        last_fetched_epoch=-1,
        current_leader_epoch=epoch,
        broker_epoch=10 + replica,
        log_start_offset=0,
    )
    assert served.error == E.none


def test_a_follower_serves_consumers_up_to_its_high_watermark(tmp_path: Path) -> None:
    n = Node(tmp_path, 1, _records_of(leader=2), RACK_AWARE_SELECTOR)
    assert not n.hosted.is_leader
    first, second = _batch(0, 5), _batch(5, 5)
    n.hosted.log.append_raw(first, now_ms=T0)
    n.hosted.log.append_raw(second, now_ms=T0)
    n.hosted.log.high_watermark = 5  # the leader's HW as this follower last heard it
    assert n.hosted.log.log_end_offset == 10

    row = n.fetch(0, rack="r1")
    assert row["error_code"] == E.none and row["high_watermark"] == 5
    assert _records(row) == len(first)  # never past its HW, though it holds offsets 5-9
    assert row["preferred_read_replica"] == -1  # only a leader names one
    assert row.get(FOLLOWER_READ) and n.follower_reads == [len(first)]
    for offset in (5, 10):  # at or past its HW, within its log: nothing yet, no error
        row = n.fetch(offset, rack="r1")
        assert (row["error_code"], _records(row)) == (E.none, 0)
    assert n.fetch(11)["error_code"] == E.offset_out_of_range  # past its log end

    n.hosted.log.high_watermark = 10
    row = n.fetch(5)
    assert row["high_watermark"] == 10 and _records(row) == len(second)
    assert n.follower_reads == [len(first), len(second)]

    # the epoch is checked first; below v11 only the leader serves consumers
    assert n.fetch(0, current_epoch=EPOCH - 1)["error_code"] == E.fenced_leader_epoch
    assert n.fetch(0, current_epoch=EPOCH + 1)["error_code"] == E.unknown_leader_epoch
    assert n.fetch(0, version=10)["error_code"] == E.not_leader_or_follower
    assert n.preferred_answers == 0


def _leader(
    tmp_path: Path, selector: str | None = RACK_AWARE_SELECTOR, **image: Any
) -> tuple[Node, int]:
    n = Node(tmp_path, 1, _records_of(leader=1, **image), selector)
    assert n.hosted.is_leader
    first = build_batch([Record(value=b"x")] * 5, base_timestamp=T0)
    n.hosted.append_records(first)
    n.hosted.append_records(build_batch([Record(value=b"y")] * 5, base_timestamp=T0 + 1000))
    return n, len(first)  # offsets 0-4, then 5-9


def test_the_leader_sends_a_consumer_to_a_follower_of_its_rack(tmp_path: Path) -> None:
    n, size = _leader(tmp_path)
    _follow(n, 2, 10)
    _follow(n, 3, 5)
    assert n.hosted.log.high_watermark == 5

    row = n.fetch(0, rack="r2")
    assert row["preferred_read_replica"] == 2 and row["error_code"] == E.none
    assert _records(row) == 0  # no read: the consumer goes to broker 2
    assert (row["high_watermark"], row["log_start_offset"]) == (5, 0)
    assert n.preferred_answers == 1
    # broker 3 holds offsets below 5 only: sent there for offset 2, not for offset 8
    assert n.fetch(2, rack="r3")["preferred_read_replica"] == 3
    row = n.fetch(8, rack="r3")
    assert row["preferred_read_replica"] == -1 and row["error_code"] == E.none
    # the leader's own rack, no rack, a rack with no replica, a v10 consumer: read here
    for rack in ("r1", "", "r9"):
        row = n.fetch(0, rack=rack)
        assert row["preferred_read_replica"] == -1 and _records(row) == size
    row = n.fetch(0, version=10, rack="r2")
    assert row["preferred_read_replica"] == -1 and _records(row) == size
    # the epoch check comes before the choice
    row = n.fetch(0, rack="r2", current_epoch=EPOCH - 1)
    assert row["error_code"] == E.fenced_leader_epoch and row["preferred_read_replica"] == -1
    assert n.follower_reads == []  # all of it served as leader


def test_a_follower_out_of_the_isr_or_fenced_is_never_named(tmp_path: Path) -> None:
    n, _size = _leader(tmp_path / "a", isr=(1, 2))
    _follow(n, 2, 10)
    _follow(n, 3, 5)  # behind the log end: not caught up, so no ISR expansion either
    assert n.fetch(0, rack="r3")["preferred_read_replica"] == -1  # 3 is not in the ISR
    assert n.fetch(0, rack="r2")["preferred_read_replica"] == 2
    n, _size = _leader(tmp_path / "b", fenced=frozenset({2}))
    _follow(n, 2, 10)
    _follow(n, 3, 10)
    assert n.fetch(0, rack="r2")["preferred_read_replica"] == -1
    assert n.fetch(0, rack="r3")["preferred_read_replica"] == 3


def test_without_a_selector_the_leader_serves_every_consumer(tmp_path: Path) -> None:
    n, size = _leader(tmp_path, selector=None)
    _follow(n, 2, 10)
    _follow(n, 3, 10)
    for rack in ("r2", "r3"):
        row = n.fetch(0, rack=rack)
        assert row["preferred_read_replica"] == -1 and _records(row) == 2 * size  # HW 10
    assert n.preferred_answers == 0


def _list_offsets(n: Node, version: int, *timestamps: int, committed: bool = False) -> list[Any]:
    """(error, offset) per timestamp, one consumer ListOffsets of t-0 each."""
    from broker.api.offsets import OffsetsApi

    api = OffsetsApi(n.api.s)
    out = []
    for ts in timestamps:
        req = build(
            REGISTRY.spec(2).request_type(version),
            {
                "replica_id": -1,
                "isolation_level": int(committed),
                "topics": [
                    {
                        "name": "t",
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}
                        ],
                    }
                ],
            },
        )
        resp = asyncio.run(api.list_offsets(Ctx(version), req))  # type: ignore[arg-type]
        [p] = resp.topics[0].partitions
        out.append((int(p.error_code), int(p.offset)))
    return out


def test_a_new_leader_whose_hw_lags_its_epoch_start_answers_offset_not_available(
    tmp_path: Path,
) -> None:
    """After a leader move, the new leader's HW may trail the log end it took over (its epoch
    starts there): latest, and a timestamp found past the HW or nowhere, are
    OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5) until the followers catch it up; a
    timestamp below the HW and earliest are answered."""
    n = Node(tmp_path, 1, _records_of(leader=2), RACK_AWARE_SELECTOR)
    n.hosted.log.append_raw(_batch(0, 5), now_ms=T0)
    late = build_batch(
        [Record(value=b"late")] * 5,
        base_offset=5,
        partition_leader_epoch=EPOCH,
        base_timestamp=T0 + 60_000,
    )
    n.hosted.log.append_raw(late, now_ms=T0)
    n.hosted.log.high_watermark = 5
    move = PartitionRecord(
        partition_id=0,
        topic_id=TOPIC_ID,
        replicas=(1, 2, 3),
        isr=(1, 2, 3),
        leader=1,
        leader_epoch=EPOCH + 1,
        partition_epoch=1,
    )
    n.image, delta = apply_records(n.image, [(100, move)])
    n.rm.apply_delta(n.image, delta)
    assert n.hosted.is_leader and n.hosted.log.high_watermark == 5
    assert n.hosted.leader.epoch_start_offset == 10

    na = E.offset_not_available
    latest, earliest, early, late_ts, future = -1, -2, T0, T0 + 60_000, T0 + 10**9
    assert _list_offsets(n, 7, latest, earliest, early, late_ts, future) == [
        (na, -1), (E.none, 0), (E.none, 0), (na, -1), (na, -1),
    ]  # fmt: skip
    assert _list_offsets(n, 4, latest) == [(E.leader_not_available, -1)]

    _follow(n, 2, 10, EPOCH + 1)
    _follow(n, 3, 10, EPOCH + 1)
    assert n.hosted.log.high_watermark == 10
    assert _list_offsets(n, 7, latest, late_ts, future) == [
        (E.none, 10), (E.none, 5), (E.none, -1),
    ]  # fmt: skip


def test_a_timestamp_past_the_high_watermark_is_not_answered(tmp_path: Path) -> None:
    """Kafka answers a consumer only offsets it may fetch: a record past the HW is -1."""
    n, _size = _leader(tmp_path)
    _follow(n, 2, 5)
    _follow(n, 3, 5)
    assert n.hosted.log.high_watermark == 5
    assert _list_offsets(n, 7, T0, T0 + 1000, -3) == [(E.none, 0), (E.none, -1), (E.none, -1)]
    _follow(n, 2, 10)
    _follow(n, 3, 10)
    assert _list_offsets(n, 7, T0 + 1000, -3) == [(E.none, 5), (E.none, 5)]
