"""Cross-checks against independent implementations: kafka-python and kio.

kafka-python (with python-snappy installed) covers every codec including xerial snappy, which
is what its producer writes by default; kio covers uncompressed batches.
"""

from __future__ import annotations

import datetime
import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record.default_records import (
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from kafka.record.memory_records import MemoryRecords
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.schema import RecordHeader as KioHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from protocol.records import (
    Compression,
    Record,
    build_batch,
    build_end_txn_marker,
    iter_records,
    scan_batches,
)
from tests.protocol.records_strategies import maybe_bytes

# kafka-python needs python-snappy for snappy; without it, leave that codec out.
KP_CODECS = [c for c in Compression if c != Compression.SNAPPY or kafka_codec.has_snappy()]

fast = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text_headers = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3).map(tuple)
kp_records = st.lists(
    st.tuples(maybe_bytes, maybe_bytes, text_headers, st.integers(0, 10**6)),
    min_size=1,
    max_size=6,
)
producer_state = st.one_of(
    st.just((-1, -1, -1, False)),
    st.tuples(
        st.integers(0, 2**62), st.integers(0, 2**15 - 1), st.integers(0, 2**30), st.booleans()
    ),
)


@fast
@given(
    recs=kp_records,
    codec=st.sampled_from(KP_CODECS),
    state=producer_state,
    base_ts=st.integers(0, 2**42),
)
def test_kafka_python_batches_scan_and_iterate(
    recs: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    codec: Compression,
    state: tuple[int, int, int, bool],
    base_ts: int,
) -> None:
    pid, epoch, seq, txn = state
    # kafka-python sends uncompressed when compression does not pay; make sure it does.
    recs = [(b"pad", b"compressible " * 30, (), 0), *recs]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=txn,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for i, (key, value, headers, ts_delta) in enumerate(recs):
        ts = base_ts if i == 0 else base_ts + ts_delta
        assert builder.append(i, ts, key, value, list(headers)) is not None
    raw = bytes(builder.build())

    (v,) = scan_batches(raw)  # verifies the CRC
    assert v.compression == codec
    assert (v.producer_id, v.producer_epoch, v.base_sequence) == (pid, epoch, seq)
    assert v.is_transactional is txn and not v.is_control
    assert v.record_count == len(recs) and v.last_offset == len(recs) - 1
    ours = list(iter_records(v))
    theirs = list(DefaultRecordBatch(raw))
    assert len(ours) == len(theirs) == len(recs)
    for o, t in zip(ours, theirs, strict=True):
        assert (o.offset, o.timestamp, o.key, o.value) == (t.offset, t.timestamp, t.key, t.value)
        assert [(k.decode(), val) for k, val in o.headers] == list(t.headers)


@fast
@given(
    recs=kp_records,
    codec=st.sampled_from(KP_CODECS),
    state=producer_state,
    base_offset=st.integers(0, 2**40),
    xerial=st.booleans(),
)
def test_our_batches_read_by_kafka_python(
    recs: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    codec: Compression,
    state: tuple[int, int, int, bool],
    base_offset: int,
    xerial: bool,
) -> None:
    pid, epoch, seq, txn = state
    records = [Record(k, v, h, d) for k, v, h, d in recs]
    raw = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        base_timestamp=1_600_000_000_000,
        xerial_snappy=xerial,
    )
    batch = DefaultRecordBatch(raw)
    assert batch.validate_crc()
    assert batch.base_offset == base_offset and batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    want = [
        (base_offset + i, 1_600_000_000_000 + d, k, v, list(h))
        for i, (k, v, h, d) in enumerate(recs)
    ]
    assert got == want


def test_uncompressed_bytes_identical_to_kafka_python() -> None:
    builder = DefaultRecordBatchBuilder(2, 0, False, 42, 3, 17, 1 << 20)
    builder.append(0, 1_000_000, b"k", b"v", [("a", b"1")])
    builder.append(1, 1_000_500, None, b"w", [])
    theirs = bytes(builder.build())
    ours = build_batch(
        [Record(b"k", b"v", (("a", b"1"),)), Record(None, b"w", (), 500)],
        partition_leader_epoch=0,  # kafka-python leaves the broker-owned field at 0
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        base_timestamp=1_000_000,
    )
    assert ours == theirs


def test_end_txn_marker_read_by_kafka_python() -> None:
    raw = build_end_txn_marker(False, producer_id=9, producer_epoch=1, coordinator_epoch=4)
    batch = DefaultRecordBatch(raw)
    assert batch.is_control_batch and batch.is_transactional
    (rec,) = list(batch)
    assert rec.abort and rec.version == 0


def test_kafka_python_memory_records_walks_our_log() -> None:
    log = b"".join(
        build_batch(
            [Record(value=b"%d" % i)], base_offset=i, compression=KP_CODECS[i % len(KP_CODECS)]
        )
        for i in range(5)
    )
    mr = MemoryRecords(log)
    values = []
    while mr.has_next():
        values += [r.value for r in mr.next_batch()]
    assert values == [b"0", b"1", b"2", b"3", b"4"]


def _kio_ts(ms: int) -> TZAwareMicros:
    dt = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return TZAwareMicros.parse(dt)


@fast
@given(
    recs=st.lists(
        st.tuples(maybe_bytes, maybe_bytes, st.integers(0, 10**6)), min_size=1, max_size=10
    ),
    base_offset=st.integers(0, 2**40),
)
def test_kio_and_us_agree_on_uncompressed_bytes(
    recs: list[tuple[bytes | None, bytes | None, int]], base_offset: int
) -> None:
    base_ts = 1_700_000_000_000  # whole seconds: kio keeps second resolution on read
    deltas = [0] + [d * 1000 for _, _, d in recs[1:]]
    kio_records = tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=_kio_ts(base_ts + deltas[i]),
            offset=i64(base_offset + i),
            key=k,
            value=v,
            headers=(KioHeader(key=b"h", value=v),),
        )
        for i, (k, v, _) in enumerate(recs)
    )
    out = io.BytesIO()
    write_new_batch(
        out,
        NewRecordBatch(
            producer_id=i64(5),
            producer_epoch=i16(1),
            partition_leader_epoch=i32(2),
            base_sequence=i32(0),
            records=kio_records,
            attributes=i16(0),
        ),
    )
    theirs = out.getvalue()
    ours = build_batch(
        [Record(k, v, (("h", v),), deltas[i]) for i, (k, v, _) in enumerate(recs)],
        base_offset=base_offset,
        partition_leader_epoch=2,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
        base_timestamp=base_ts,
    )
    assert ours == theirs
    batch, size = read_batch(ours, 0)
    assert size == len(ours)
    assert [(r.offset, r.key, r.value) for r in batch.records] == [
        (base_offset + i, k, v) for i, (k, v, _) in enumerate(recs)
    ]
    (v,) = scan_batches(theirs)
    assert [r.timestamp for r in iter_records(v)] == [base_ts + d for d in deltas]
