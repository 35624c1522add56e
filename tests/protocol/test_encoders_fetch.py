"""The hand-written Fetch response encoder (from the broker's rows) against kio's generic writer,
plus zero-copy checks."""

import dataclasses
import datetime
import importlib
import io
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v18 import response as v18
from kio.schema.types import BrokerId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from protocol.build import error_code
from protocol.encoders.fetch import encode_fetch_rows

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def response_class(version: int) -> type[Any]:
    cls: type[Any] = importlib.import_module(f"kio.schema.fetch.v{version}.response").FetchResponse
    return cls


def kio_bytes(cls: type[Any], obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, obj)
    return buf.getvalue()


# A stand-in for our generated v19 type: v18 plus the KIP-1279 partition tag 3. Declaring it as
# kio dataclasses lets kio's own writer serve as the reference encoding.
@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionData19(v18.PartitionData):
    __version__: ClassVar[i16] = i16(19)
    mirror_leader_epoch: i32 = field(metadata={"kafka_type": "int32", "tag": 3}, default=i32(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchableTopicResponse19(v18.FetchableTopicResponse):
    __version__: ClassVar[i16] = i16(19)
    partitions: tuple[PartitionData19, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse19(v18.FetchResponse):
    __version__: ClassVar[i16] = i16(19)
    responses: tuple[FetchableTopicResponse19, ...]


def test_v19_stand_in_has_tag_3() -> None:
    tags = {f.name: f.metadata.get("tag") for f in dataclasses.fields(PartitionData19)}
    assert tags["mirror_leader_epoch"] == 3
    assert tags["snapshot_id"] == 2


# -- the rows encoder (what FetchApi answers with) ---------------------------------------------

_EPOCH_PAIR = st.tuples(st.integers(-1, 2**31 - 1), st.integers(-1, 2**62))
_PART_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "partition_index": st.integers(0, 2**31 - 1),
            "error_code": st.sampled_from([0, 6, 74, 134]),
            "high_watermark": st.integers(-1, 2**62),
            "last_stable_offset": st.integers(-1, 2**62),
            "log_start_offset": st.integers(-1, 2**62),
            "aborted_transactions": st.one_of(
                st.none(),
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "producer_id": st.integers(0, 2**62),
                            "first_offset": st.integers(0, 2**62),
                        }
                    ),
                    max_size=2,
                ),
            ),
            "preferred_read_replica": st.sampled_from([-1, 0, 3, 2**31 - 1]),
            "records": st.one_of(
                st.just(b""), st.binary(min_size=1, max_size=40).map(lambda b: [b, b[:3]])
            ),
        },
        optional={
            "diverging_epoch": _EPOCH_PAIR.map(lambda e: {"epoch": e[0], "end_offset": e[1]}),
            "current_leader": st.tuples(st.integers(-1, 9), st.integers(-1, 99)).map(
                lambda e: {"leader_id": e[0], "leader_epoch": e[1]}
            ),
            "snapshot_id": _EPOCH_PAIR.map(lambda e: {"epoch": e[0], "end_offset": e[1]}),
            "mirror_leader_epoch": st.integers(-1, 2**31 - 1),
        },
    ),
    max_size=3,
)


def _kio_of_rows(
    version: int, throttle_ms: int, error: int, session: int, topics: list[dict[str, Any]]
) -> tuple[type[Any], Any]:
    """The same answer as kio objects (v19: the stand-in above), for kio's writer."""
    if version == 19:
        part_cls: type[Any] = PartitionData19
        topic_cls: type[Any] = FetchableTopicResponse19
        resp_cls: type[Any] = FetchResponse19
        mod: Any = v18
    else:
        mod = importlib.import_module(f"kio.schema.fetch.v{version}.response")
        part_cls, topic_cls, resp_cls = (
            mod.PartitionData,
            mod.FetchableTopicResponse,
            mod.FetchResponse,
        )
    names = {f.name for f in dataclasses.fields(part_cls)}

    def part(r: dict[str, Any]) -> Any:
        kw: dict[str, Any] = {
            k: r[k]
            for k in ("partition_index", "high_watermark", "last_stable_offset", "log_start_offset")
            if k in names
        }
        kw["error_code"] = error_code(r["error_code"])  # 134: a KIP-1279 code, not in kio's enum
        records = r["records"]
        kw["records"] = b"".join(records) if isinstance(records, list) else records
        aborted = r["aborted_transactions"]
        kw["aborted_transactions"] = (
            None
            if aborted is None
            else tuple(
                mod.AbortedTransaction(producer_id=a["producer_id"], first_offset=a["first_offset"])
                for a in aborted
            )
        )
        if "preferred_read_replica" in names:
            kw["preferred_read_replica"] = BrokerId(r["preferred_read_replica"])
        if "diverging_epoch" in names and "diverging_epoch" in r:
            kw["diverging_epoch"] = mod.EpochEndOffset(**r["diverging_epoch"])
        if "current_leader" in names and "current_leader" in r:
            cl = r["current_leader"]
            kw["current_leader"] = mod.LeaderIdAndEpoch(
                leader_id=BrokerId(cl["leader_id"]), leader_epoch=cl["leader_epoch"]
            )
        if "snapshot_id" in names and "snapshot_id" in r:
            kw["snapshot_id"] = mod.SnapshotId(**r["snapshot_id"])
        if "mirror_leader_epoch" in names and "mirror_leader_epoch" in r:
            kw["mirror_leader_epoch"] = r["mirror_leader_epoch"]
        return part_cls(**kw)

    key = "topic_id" if version >= 13 else "topic"
    top: dict[str, Any] = {
        "throttle_time": datetime.timedelta(milliseconds=throttle_ms),
        "responses": tuple(
            topic_cls(**{key: t[key]}, partitions=tuple(part(r) for r in t["partitions"]))
            for t in topics
        ),
    }
    if version >= 7:
        top |= {"error_code": ErrorCode(error), "session_id": session}
    return resp_cls, resp_cls(**top)


@pytest.mark.parametrize("version", range(4, 20))
def test_rows_encoder_matches_kio_writer(version: int) -> None:
    @SETTINGS
    @given(
        st.lists(
            st.fixed_dictionaries(
                {
                    "topic": st.text(min_size=1, max_size=8),
                    "topic_id": st.uuids(),
                    "partitions": _PART_ROWS,
                }
            ),
            max_size=3,
        ),
        st.integers(0, 1000),
        st.sampled_from([0, 70]),
        st.integers(0, 2**31 - 1),
    )
    def check(topics: list[dict[str, Any]], throttle: int, error: int, session: int) -> None:
        cls, resp = _kio_of_rows(version, throttle, error, session, topics)
        parts = encode_fetch_rows(throttle, error, session, topics, version)
        assert b"".join(parts) == kio_bytes(cls, resp)
        blobs = [b for t in topics for r in t["partitions"] if r["records"] for b in r["records"]]
        passed = [p for p in parts if any(p is b for b in blobs)]
        assert len(passed) == sum(1 for b in blobs if len(b))  # record bytes never copied

    check()


TOPIC_ID = uuid.UUID(int=0x1234)


def rows(version: int, partitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One topic of partition rows, the fields a test leaves out at their usual values."""
    out = []
    for i, kw in enumerate(partitions):
        row: dict[str, Any] = {
            "partition_index": i,
            "error_code": 0,
            "high_watermark": 100 + i,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": b"",
        }
        row.update(kw)
        out.append(row)
    return [{"topic": "orders", "topic_id": TOPIC_ID, "partitions": out}]


def encoded(version: int, partitions: list[dict[str, Any]]) -> bytes:
    return b"".join(encode_fetch_rows(5, 0, 7, rows(version, partitions), version))


def expected(version: int, partitions: list[dict[str, Any]]) -> bytes:
    cls, resp = _kio_of_rows(version, 5, 0, 7, rows(version, partitions))
    return kio_bytes(cls, resp)


def test_v19_tag_3_sorted_after_other_tags_and_omitted_when_default() -> None:
    leader = {"leader_id": 2, "leader_epoch": 9}
    with_epoch = {"current_leader": leader, "mirror_leader_epoch": 42}
    for kw in (with_epoch, {"current_leader": leader}, {"mirror_leader_epoch": -1}):
        assert encoded(19, [kw]) == expected(19, [kw])
    # Partition ends: empty records (compact length 1), then 2 tags: 1 (leader 2, epoch 9)
    # and 3 (epoch 42); then the topic's and the response's empty tag sections.
    tail = "01" + "02" + "0109" + "00000002" + "00000009" + "00" + "0304" + "0000002a" + "00" + "00"
    assert encoded(19, [with_epoch]).endswith(bytes.fromhex(tail))
    # Below v19 the field does not exist on the wire.
    assert encoded(18, [with_epoch]) == encoded(18, [{"current_leader": leader}])


@pytest.mark.parametrize("version", range(4, 20))
def test_preferred_read_replica_as_kio_writes_and_reads_it(version: int) -> None:
    """KIP-392's field: a leader's answer (no records, another replica named), with and without
    aborted transactions, is kio's bytes; kio reads the replica back from v11 on."""
    aborted = [{"producer_id": 9, "first_offset": 3}]
    answers = [
        {"preferred_read_replica": 2},
        {"preferred_read_replica": 2, "aborted_transactions": aborted},
        {"preferred_read_replica": -1, "records": [b"x" * 5]},
    ]
    body = encoded(version, answers)
    assert body == expected(version, answers)
    cls, _resp = _kio_of_rows(version, 5, 0, 7, rows(version, answers))
    if version == 19:
        return  # the v19 stand-in has no reader of its own; v18 covers the layout
    decoded, size = entity_reader(cls)(body, 0)
    assert size == len(body)
    got = [int(getattr(p, "preferred_read_replica", -1)) for p in decoded.responses[0].partitions]
    assert got == ([2, 2, -1] if version >= 11 else [-1, -1, -1])


@pytest.mark.parametrize("version", [4, 11, 12, 16, 18, 19])
def test_record_buffers_are_passed_through_not_copied(version: int) -> None:
    raw = bytes(range(256)) * 64
    view = memoryview(raw)[100:5000]
    mutable = bytearray(b"x" * 77)
    seg_a, seg_b = memoryview(raw)[:300], memoryview(raw)[300:1000]
    records: list[Any] = [raw, view, None, mutable, [seg_a, b"", seg_b], b"", (seg_b,)]
    parts = encode_fetch_rows(5, 0, 7, rows(version, [{"records": r} for r in records]), version)
    blobs = [raw, view, mutable, seg_a, seg_b, seg_b]
    # Header pieces between blobs are coalesced: the list alternates header, blob(s), header.
    passed = [p for p in parts if any(p is b for b in blobs)]
    assert len(passed) == len(blobs)
    assert all(p is b for p, b in zip(passed, blobs, strict=True))
    headers = [p for p in parts if not any(p is b for b in blobs)]
    assert all(type(h) is bytes for h in headers)
    assert len(headers) == 6  # before each of the 5 non-empty partitions' records, plus the tail
    # The joined result is exactly what kio writes for the same data as single bytes objects.
    flat = [
        None if r is None else b"".join(r) if isinstance(r, (list, tuple)) else bytes(r)
        for r in records
    ]
    assert b"".join(parts) == expected(version, [{"records": r} for r in flat])


def test_large_records_length_prefixes() -> None:
    big = bytes(1 << 20)
    parts = encode_fetch_rows(5, 0, 7, rows(16, [{"records": big}, {"records": [big, big]}]), 16)
    assert parts[1] is big and parts[3] is big and parts[4] is big
    assert b"".join(parts) == expected(16, [{"records": big}, {"records": big + big}])


@given(st.integers(min_value=20, max_value=40) | st.integers(max_value=3))
def test_rejects_versions_it_does_not_serve(version: int) -> None:
    with pytest.raises(ValueError, match="version"):
        encode_fetch_rows(0, 0, 0, [], version)
