"""Hypothesis strategies and comparison helpers shared by the test_records_* modules."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from protocol.records import Compression, DecodedRecord, Record

small_bytes = st.binary(max_size=40)
maybe_bytes = st.none() | small_bytes
header_key = st.text(max_size=10) | st.binary(max_size=10)
headers = st.lists(st.tuples(header_key, maybe_bytes), max_size=3).map(tuple)

records_default_offsets = st.lists(
    st.builds(
        Record,
        key=maybe_bytes,
        value=maybe_bytes,
        headers=headers,
        timestamp_delta=st.integers(-(10**9), 10**9),
    ),
    min_size=1,
    max_size=8,
)


@st.composite
def records_with_gaps(draw: st.DrawFn) -> list[Record]:
    """Records with strictly increasing, gappy offset deltas (as after compaction)."""
    recs = draw(records_default_offsets)
    deltas = sorted(draw(st.sets(st.integers(0, 10_000), min_size=len(recs), max_size=len(recs))))
    return [
        Record(r.key, r.value, r.headers, r.timestamp_delta, d)
        for r, d in zip(recs, deltas, strict=True)
    ]


any_records = records_default_offsets | records_with_gaps()
codecs = st.sampled_from(list(Compression))

int64 = st.integers(-(2**63), 2**63 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
base_offsets = st.integers(0, 2**62)
timestamps = st.integers(0, 2**45)


def header_bytes(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


def expected_decoded(
    records: Sequence[Record],
    base_offset: int,
    base_timestamp: int,
    append_time: int | None = None,
) -> list[DecodedRecord]:
    """What iter_records must return for a batch built from ``records``."""
    out = []
    for i, r in enumerate(records):
        od = i if r.offset_delta is None else r.offset_delta
        out.append(
            DecodedRecord(
                offset=base_offset + od,
                timestamp=append_time
                if append_time is not None
                else base_timestamp + r.timestamp_delta,
                key=r.key,
                value=r.value,
                headers=tuple((header_bytes(k), v) for k, v in r.headers),
                attributes=0,
                offset_delta=od,
                timestamp_delta=r.timestamp_delta,
            )
        )
    return out
