"""The records' own timestamps (the leader's max-timestamp walk) agree with a full decode, and
bad record framing is a CorruptRecordError, never an IndexError or a wrong answer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordError
from protocol.records import (
    BatchView,
    Compression,
    Record,
    build_batch,
    encode_records,
    header_max_timestamp_suspect,
    iter_records,
    max_timestamp_delta,
    record_data,
    records_max_timestamp,
    set_max_timestamp,
    timestamp_delta_range,
)
from protocol.records.varint import encode_varint

from .records_strategies import any_records, codecs, timestamps

DELTAS = {
    "zero": lambda rnd, i: 0,
    "rising": lambda rnd, i: i // 7,
    "one byte": lambda rnd, i: rnd.randint(-64, 63),
    "two bytes": lambda rnd, i: rnd.randint(-8192, 8191),
    "two bytes, positive": lambda rnd, i: rnd.randint(64, 8191),
    "rising fast": lambda rnd, i: i * 37,
    "three bytes": lambda rnd, i: rnd.randint(8192, 2**20 - 1),
    "some long": lambda rnd, i: rnd.choice([rnd.randint(0, 63), rnd.randint(-(2**40), 2**40)]),
    "negative": lambda rnd, i: -rnd.randint(1, 10_000),
}


@st.composite
def long_batches(draw: st.DrawFn) -> tuple[list[Record], int]:
    """Many records, mostly of one size (the walk's strided fast path), with odd ones out."""
    rnd = draw(st.randoms(use_true_random=False))
    size = draw(st.sampled_from([0, 1, 20, 59, 60, 61, 62, 100, 8170, 8200]))
    most = 40 if size > 1000 else 700
    count = draw(st.sampled_from([1, 9, 17, 100, most]) | st.integers(1, most))
    kind = draw(st.sampled_from(sorted(DELTAS)))
    odd = draw(st.sampled_from([0.0, 0.001, 0.05, 0.5]))
    # +64 bytes changes only the second byte of a two-byte length varint
    odd_extra = draw(st.sampled_from([1, 2, 3, 64]))
    key = draw(st.sampled_from([None, b"key"]))
    records = [
        Record(
            key=key,
            value=bytes(size + (odd_extra if rnd.random() < odd else 0)),
            timestamp_delta=DELTAS[kind](rnd, i),
        )
        for i in range(count)
    ]
    return records, draw(st.integers(0, 2**45))


big_deltas = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=300),
        value=st.none() | st.binary(max_size=300),
        timestamp_delta=st.integers(-(2**40), 2**40),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(records=any_records | big_deltas, base=timestamps, codec=codecs)
def test_walk_agrees_with_a_full_decode(
    records: list[Record], base: int, codec: Compression
) -> None:
    view = BatchView(build_batch(records, base_timestamp=base, max_timestamp=0, compression=codec))
    deltas = [r.timestamp_delta for r in iter_records(view)]
    data = record_data(view)
    assert max_timestamp_delta(data, len(records)) == max(deltas)
    assert timestamp_delta_range(data, len(records)) == (min(deltas), max(deltas))
    assert records_max_timestamp(view) == max(-1, base + max(deltas))


@settings(max_examples=300, deadline=None)
@given(batch=long_batches(), lie=st.sampled_from([None, 0, 1, -1, 100, 5000, 10**6]))
def test_strided_walk_of_long_batches_is_exact(
    batch: tuple[list[Record], int], lie: int | None
) -> None:
    records, base = batch
    true_max = max(r.timestamp_delta for r in records)
    data = encode_records(records)
    # the header's claim only speeds up an honest batch: any claim gives the same answer
    claimed = true_max if lie is None else true_max + lie if lie else 0
    assert max_timestamp_delta(data, len(records), claimed) == true_max
    assert max_timestamp_delta(memoryview(data), len(records)) == true_max
    assert timestamp_delta_range(data, len(records))[1] == true_max
    view = BatchView(build_batch(records, base_timestamp=base, max_timestamp=base + claimed))
    assert records_max_timestamp(view) == max(-1, base + true_max)


@settings(max_examples=200, deadline=None)
@given(records=any_records | big_deltas, cut=st.integers(1, 10_000), junk=st.binary(max_size=3))
def test_cut_or_padded_records_are_corrupt(records: list[Record], cut: int, junk: bytes) -> None:
    data = encode_records(records)
    bad = [data[: max(0, len(data) - cut)]]
    if junk:
        bad.append(data + junk)
    for candidate in bad:
        for walk in (max_timestamp_delta, timestamp_delta_range):
            with pytest.raises(CorruptRecordError):
                walk(candidate, len(records))


def _raw_record(ts_varint: bytes, offset_delta: int, value: bytes) -> bytes:
    body = bytearray(b"\x00") + ts_varint
    encode_varint(offset_delta, body)
    encode_varint(-1, body)  # null key
    encode_varint(len(value), body)
    body += value
    body += b"\x00"  # no headers
    out = bytearray()
    encode_varint(len(body), out)
    return bytes(out + body)


def test_non_canonical_two_byte_deltas_beside_one_byte_ones() -> None:
    """A hostile writer may spend two bytes on a small delta (0x84 0x00 is 2); records of equal
    length then mix one- and two-byte deltas, and the largest may be a one-byte one."""
    records = []
    for i in range(40):
        if i % 2:
            records.append(_raw_record(b"\x84\x00", i % 60, bytes(10)))  # delta 2
        else:  # delta 50 once, deep in the run the strided path reads; else 0
            records.append(_raw_record(bytes((100 if i == 30 else 0,)), i % 60, bytes(11)))
    data = b"".join(records)
    assert len({len(r) for r in records}) == 1
    assert max_timestamp_delta(data, 40) == 50
    assert timestamp_delta_range(data, 40) == (0, 50)


def test_a_run_ends_where_the_second_length_byte_changes() -> None:
    """Values 64 bytes longer change only the second byte of a two-byte length varint."""
    records = [Record(value=bytes(100), timestamp_delta=1)] * 20
    records += [Record(value=bytes(164), timestamp_delta=5)] * 20
    data = encode_records(records)
    assert max_timestamp_delta(data, 40) == 5
    assert max_timestamp_delta(data, 40, 5) == 5


def test_a_negative_record_length_is_corrupt() -> None:
    records = encode_records([Record(value=b"x")] * 3)
    # zigzag 2L + 1 is -(L + 1): lengths still chain if read as L, but no writer produces one
    bad = bytearray(records)
    bad[0] |= 1
    with pytest.raises(CorruptRecordError):
        max_timestamp_delta(bytes(bad), 3)
    with pytest.raises(CorruptRecordError):
        timestamp_delta_range(bytes(bad), 3)


def test_set_max_timestamp_rewrites_the_crc() -> None:
    buf = bytearray(build_batch([Record(value=b"a")], base_timestamp=1000, max_timestamp=0))
    set_max_timestamp(buf, 0, 1000)
    view = BatchView(buf)
    assert (view.max_timestamp, view.timestamp_type) == (1000, 0)
    assert view.crc_ok()
    set_max_timestamp(buf, 0, 2000, log_append_time=True)
    assert (view.max_timestamp, view.timestamp_type) == (2000, 1)
    assert view.crc_ok()


@pytest.mark.parametrize(
    ("base", "max_ts", "append_time", "suspect"),
    [
        (1000, 1000, False, False),
        (1000, 5000, False, False),
        (1000, 0, False, True),  # below the base: never legitimate
        (-1, 0, False, True),  # librdkafka with no record timestamps
        (-1, -1, False, True),  # first record without a timestamp: check the others
        (1000, 0, True, False),  # LogAppendTime: the broker's stamp is the truth
    ],
)
def test_which_headers_are_checked(
    base: int, max_ts: int, append_time: bool, suspect: bool
) -> None:
    view = BatchView(
        build_batch(
            [Record(value=b"a")],
            base_timestamp=base,
            max_timestamp=max_ts,
            log_append_time=append_time,
        )
    )
    assert header_max_timestamp_suspect(view) is suspect
