"""The aborted-transaction index: Kafka's 34-byte entry layout, the file, the dump tool."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.cli.dump_log import dump_txn_index
from broker.log.txn_index import TransactionIndex
from protocol.errors import CorruptRecordError
from protocol.txn_index import ENTRY_SIZE, AbortedTxn, decode_entries, encode_entry

# Kafka's AbortedTxn: int16 version, int64 producerId, int64 firstOffset, int64 lastOffset,
# int64 lastStableOffset, big-endian, written here byte by byte.
KAFKA_ENTRY = bytes.fromhex(
    "0000"  # version 0
    "00000000000003e9"  # producer id 1001
    "0000000000000005"  # first offset 5
    "0000000000000009"  # last offset 9 (the ABORT marker)
    "0000000000000007"  # last stable offset 7
)


def test_entry_matches_kafka_layout() -> None:
    txn = AbortedTxn(producer_id=1001, first_offset=5, last_offset=9, last_stable_offset=7)
    assert ENTRY_SIZE == 34 == len(KAFKA_ENTRY)
    assert encode_entry(txn) == KAFKA_ENTRY
    assert decode_entries(KAFKA_ENTRY * 2 + b"\x00\x00\x01") == ([txn, txn], 3)


def test_unknown_version_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="unknown version 1"):
        decode_entries(b"\x00\x01" + KAFKA_ENTRY[2:])


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1),
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=20,
    )
)
def test_entries_round_trip(values: list[tuple[int, int, int, int]]) -> None:
    txns = [AbortedTxn(*v) for v in values]
    raw = b"".join(encode_entry(t) for t in txns)
    assert len(raw) == ENTRY_SIZE * len(txns)
    assert decode_entries(raw) == (txns, 0)


def _index(tmp_path: Path, base: int = 100) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{base:020d}.txnindex", base)


def test_file_is_created_on_first_entry_and_reloads(tmp_path: Path) -> None:
    index = _index(tmp_path)
    assert index.count == 0 and not index.path.exists()
    a = AbortedTxn(7, 90, 101, 95)
    b = AbortedTxn(8, 100, 105, 106)
    index.append(a)
    index.append(b)
    index.flush()
    index.close()
    assert index.path.read_bytes() == encode_entry(a) + encode_entry(b)
    again = _index(tmp_path)
    assert again.count == 2 and again.entries() == [a, b]
    with pytest.raises(ValueError, match="marker order"):
        again.append(AbortedTxn(9, 100, 105, 106))


def test_collect_overlap_and_completeness(tmp_path: Path) -> None:
    index = _index(tmp_path)
    t1 = AbortedTxn(1, 100, 104, 103)  # another transaction open at 103 when it ended
    t2 = AbortedTxn(2, 103, 110, 111)
    index.append(t1)
    index.append(t2)
    # [fetch, upper) overlaps a transaction when last >= fetch and first < upper.
    assert index.collect(100, 101) == ([t1], True)  # t1's LSO 103 reaches the bound: stop
    assert index.collect(105, 111) == ([t2], True)
    assert index.collect(111, 120) == ([], False)  # past both: look further
    assert index.collect(100, 103) == ([t1], True)
    assert index.collect(104, 105) == ([t1, t2], True)


def test_truncate_and_reset(tmp_path: Path) -> None:
    index = _index(tmp_path)
    for i in range(3):
        index.append(AbortedTxn(i, 100 + 10 * i, 105 + 10 * i, 106 + 10 * i))
    index.truncate_to(115)  # drops the entry whose marker is at 115, keeps 105
    assert [t.last_offset for t in index.entries()] == [105]
    assert index.path.stat().st_size == ENTRY_SIZE
    index.append(AbortedTxn(9, 110, 112, 113))  # appends continue after the cut
    assert _index(tmp_path).entries()[-1] == AbortedTxn(9, 110, 112, 113)
    index.reset()
    assert index.count == 0 and index.path.stat().st_size == 0


@pytest.mark.parametrize(
    ("tail", "why", "kept"),
    [
        (b"\x00" * 10, "trailing bytes", 2),
        (encode_entry(AbortedTxn(3, 1, 50, 51)), "below the segment's base offset", 2),
        (encode_entry(AbortedTxn(3, 100, 101, 102)), "out of order", 2),
        (b"\x00\x07" + KAFKA_ENTRY[2:], "unknown version", 2),
    ],
)
def test_sanity_check_cuts_to_the_valid_prefix(
    tmp_path: Path, tail: bytes, why: str, kept: int
) -> None:
    good = [AbortedTxn(1, 100, 102, 103), AbortedTxn(2, 101, 104, 105)]
    path = tmp_path / f"{100:020d}.txnindex"
    path.write_bytes(b"".join(encode_entry(t) for t in good) + tail)
    index = TransactionIndex(path, 100)
    problem = index.sanity_check()
    assert problem is not None and why in problem
    assert index.count == kept and index.entries() == good
    assert path.stat().st_size == kept * ENTRY_SIZE
    assert TransactionIndex(path, 100).sanity_check() is None


def test_dump_log_prints_entries_like_kafka(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(KAFKA_ENTRY)
    out = io.StringIO()
    dump_txn_index(path, out=out)
    assert out.getvalue() == (
        "version: 0 producerId: 1001 firstOffset: 5 lastOffset: 9 lastStableOffset: 7\n"
    )
