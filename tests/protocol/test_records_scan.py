"""scan_batches / valid_prefix / summarize: framing, corruption and torn tails."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordError, ProtocolError, TruncatedError
from protocol.records import (
    Compression,
    Record,
    Summary,
    TruncatedBatchError,
    build_batch,
    iter_records,
    parse_control_record,
    scan_batches,
    summarize,
    valid_prefix,
)
from protocol.records.batch import CRC_START

fast = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _batch(base_offset: int, n: int = 2, codec: Compression = Compression.NONE) -> bytes:
    recs = [Record(key=b"k%d" % i, value=b"v" * (i + 3)) for i in range(n)]
    return build_batch(recs, base_offset=base_offset, compression=codec, base_timestamp=10)


BATCHES = [_batch(0, 3), _batch(3, 1, Compression.ZSTD), _batch(4, 2, Compression.GZIP)]
LOG = b"".join(BATCHES)


@fast
@given(data=st.data(), codec=st.sampled_from(list(Compression)))
def test_flipping_any_crc_covered_byte_is_detected(data: st.DataObject, codec: Compression) -> None:
    raw = bytearray(_batch(0, 3, codec))
    i = data.draw(st.integers(CRC_START, len(raw) - 1))
    raw[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError, match="CRC32C mismatch") as info:
        list(scan_batches(raw))
    assert info.value.position == 0


def test_crc_error_names_position_and_both_values() -> None:
    buf = bytearray(LOG)
    pos = len(BATCHES[0])
    buf[pos + 30] ^= 1
    with pytest.raises(CorruptRecordError) as info:
        list(scan_batches(buf))
    assert info.value.position == pos
    msg = str(info.value)
    assert f"byte {pos}" in msg and "header says 0x" in msg and "computes to 0x" in msg
    # Without CRC verification the same bytes scan fine.
    assert len(list(scan_batches(buf, verify_crc=False))) == 3


@given(cut=st.integers(1, len(LOG) - 1))
def test_truncation_anywhere(cut: int) -> None:
    buf = LOG[:cut]
    whole = 0
    acc = 0
    for b in BATCHES:
        if acc + len(b) > cut:
            break
        whole += 1
        acc += len(b)
    if acc == cut:
        assert len(list(scan_batches(buf))) == whole
        return
    with pytest.raises(TruncatedError) as info:
        list(scan_batches(buf))
    assert isinstance(info.value, TruncatedBatchError) and info.value.position == acc
    assert [v.position for v in scan_batches(buf, allow_partial_tail=True)] == [
        sum(len(b) for b in BATCHES[:i]) for i in range(whole)
    ]
    assert valid_prefix(buf)[:2] == (acc, whole)
    assert isinstance(valid_prefix(buf)[2], TruncatedError)


def test_valid_prefix_cases() -> None:
    assert valid_prefix(LOG) == (len(LOG), 3, None)
    assert valid_prefix(b"") == (0, 0, None)
    torn = bytearray(LOG)
    second = len(BATCHES[0])
    torn[second + 40] ^= 0xFF
    n, count, err = valid_prefix(torn)
    assert (n, count) == (second, 1)
    assert isinstance(err, CorruptRecordError) and err.position == second
    # Relative to start, bounded by end.
    n, count, err = valid_prefix(b"xx" + LOG, 2, 2 + second + 5)
    assert (n, count) == (second, 1) and isinstance(err, TruncatedError)


def test_range_arguments() -> None:
    prefix = b"garbage!"
    buf = prefix + LOG + b"tail"
    views = list(scan_batches(buf, len(prefix), len(prefix) + len(LOG)))
    assert [v.base_offset for v in views] == [0, 3, 4]
    with pytest.raises(ValueError):
        list(scan_batches(LOG, 5, 2))
    with pytest.raises(ValueError):
        list(scan_batches(LOG, 0, len(LOG) + 1))


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_rejected_clearly(magic: int) -> None:
    # A v0/v1 message: offset, size, crc, magic, attributes, (timestamp), key, value.
    body = struct.pack(">bb", magic, 0) + (b"\0" * 8 if magic else b"") + b"\xff\xff\xff\xff"
    body += struct.pack(">i", 3) + b"abc"
    msg = struct.pack(">qiI", 0, 4 + len(body), 0) + body
    with pytest.raises(CorruptRecordError, match=f"magic {magic} not supported"):
        list(scan_batches(msg))
    with pytest.raises(CorruptRecordError, match=f"magic {magic} not supported"):
        list(scan_batches(msg, allow_partial_tail=True))


def test_bad_magic_and_bad_lengths() -> None:
    raw = bytearray(BATCHES[0])
    raw[16] = 7
    with pytest.raises(CorruptRecordError, match="invalid magic 7"):
        list(scan_batches(raw))
    for length, word in ((-5, "negative"), (0, "too small"), (48, "too small")):
        raw = bytearray(BATCHES[0])
        struct.pack_into(">i", raw, 8, length)
        with pytest.raises(CorruptRecordError, match=word):
            list(scan_batches(raw, allow_partial_tail=True))
    # A length pointing past the end is a torn batch, not corruption.
    raw = bytearray(BATCHES[0])
    struct.pack_into(">i", raw, 8, 10_000)
    with pytest.raises(TruncatedError):
        list(scan_batches(raw))
    assert list(scan_batches(raw, allow_partial_tail=True)) == []


def test_summarize() -> None:
    assert summarize(LOG) == Summary(0, 5, 3, len(LOG))
    assert summarize(b"") == Summary(-1, -1, 0, 0)
    first, last, count, size = summarize(LOG + LOG[:20], allow_partial_tail=True)
    assert (first, last, count, size) == (0, 5, 3, len(LOG))
    with pytest.raises(TruncatedError):
        summarize(LOG + LOG[:20])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_protocol_errors(data: bytes) -> None:
    for verify in (True, False):
        try:
            for v in scan_batches(data, verify_crc=verify, allow_partial_tail=verify):
                for _ in iter_records(v):
                    pass
        except ProtocolError:
            pass
    valid_prefix(data)
    with contextlib.suppress(ProtocolError):
        parse_control_record(data[:6], data[6:])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), codec=st.sampled_from(list(Compression)))
def test_mutated_record_bodies_only_raise_protocol_errors(
    data: st.DataObject, codec: Compression
) -> None:
    """Corrupt the payload (CRC unchecked) so the record decoder sees garbage."""
    raw = bytearray(
        build_batch(
            [
                Record(b"key", b"value" * 5, (("h", b"x"), ("i", None))),
                Record(None, b"v2", timestamp_delta=-3),
            ],
            compression=codec,
        )
    )
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(57, len(raw) - 1))  # record count and payload
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(61, len(raw)))
    del raw[cut:]
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    try:
        for v in scan_batches(raw, verify_crc=False):
            for _ in iter_records(v, max_decompressed=1 << 20):
                pass
    except ProtocolError:
        pass
