"""The timestamps a batch's records really carry, read from the records, not the header.

A producer's header ``max_timestamp`` is only a claim (librdkafka writes 0 when every record says
-1), so a leader recomputes it as Kafka does. That makes this the one per-record pass on the
produce hot path, and a Python loop over records (~110 ns each) would dominate a small-record
produce. So ``max_timestamp_delta`` walks records one by one only until it meets a run of
records of equal length (fixed-size values, the common case); such a run is laid out at a fixed
stride, so its records' timestamp-delta bytes are one strided slice, and its length and maximum
come from C-speed bytes operations (strided slices, comparisons, ``translate``, big-int masks),
a few per run instead of a few per record. Every step is exact: anything unusual (deltas of
3 bytes or more, records of 8 KiB or more, varying sizes) goes back to the per-record decode,
and the header's claim only shortens the search for the maximum, never replaces it. Records
must chain exactly to the end of the data; anything else is ``CorruptRecordError``.
"""

from __future__ import annotations

from protocol.errors import CorruptRecordError

from .batch import TIMESTAMP_TYPE_MASK, BatchView, Buffer
from .codecs import DEFAULT_MAX_DECOMPRESSED, decompress
from .varint import decode_uvarint

NO_TIMESTAMP = -1

# Equal record lengths in a row before a run is looked for, and the first probe's size.
_RUN_START = 8
_FIRST_PROBE = 64

# translate() tables. Deleting _SINGLE leaves only bytes >= 0x80 (a varint continues).
_SINGLE = bytes(range(0x80))
_SINGLE_OR_ZERO = bytes(b if b < 0x80 else 0 for b in range(256))
_MULTI_MASK = bytes(0xFF if b >= 0x80 else 0 for b in range(256))
_LOW7 = bytes(b & 0x7F for b in range(256))
_UP_TO = [bytes(range(r + 1)) for r in range(256)]


def record_data(view: BatchView, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Buffer:
    """The record section of ``view``, decompressed if the batch is compressed."""
    payload = view.records_payload
    codec = view.compression
    return decompress(codec, payload, max_size=max_decompressed) if codec else payload


def max_timestamp_delta(data: Buffer, count: int, claimed: int = 0) -> int:
    """The largest timestamp delta of the ``count`` records in ``data`` (uncompressed).

    ``claimed`` is what the header says it is (max - base timestamp): an honest claim is
    confirmed in a couple of passes over a run instead of searched for.
    """
    hint = claimed << 1 if claimed >= 0 else (-claimed << 1) - 1  # zigzag
    top = _max_zigzag_delta(data, count, hint)
    if top & 1:
        # The most extreme delta is negative (zigzag odd): rare enough for the exact walk.
        return timestamp_delta_range(data, count)[1]
    # An even zigzag value v is the delta v / 2, and beats every negative (odd) one.
    return top >> 1


def _max_zigzag_delta(data: Buffer, count: int, hint: int) -> int:
    """The largest zigzag-encoded timestamp delta of the records (see the module docstring)."""
    end = len(data) if not isinstance(data, memoryview) else data.nbytes
    pos = 0
    done = 0
    top = 0
    parity = 0  # OR of every zigzag length: an odd one is a negative length
    try:
        while done < count:
            prev = -1
            streak = 0
            walked = 0
            for walked in range(1, count - done + 1):  # noqa: B007 - read after the loop
                n = data[pos]
                if n < 0x80:
                    pos += 1
                else:
                    b = data[pos + 1]
                    if b < 0x80:
                        n += (b << 7) - 0x80
                        pos += 2
                    elif (c := data[pos + 2]) < 0x80:  # records of 8 KiB to 1 MiB
                        n += ((b - 0x80) << 7) + (c << 14) - 0x80
                        pos += 3
                    else:
                        n, pos = decode_uvarint(data, pos, end)
                parity |= n
                z = data[pos + 1]  # after the one-byte record attributes
                if z > 0x7F:
                    b = data[pos + 2]
                    z = (
                        z + (b << 7) - 0x80
                        if b < 0x80
                        else decode_uvarint(data, pos + 1, end, 10)[0]
                    )
                if z > top:
                    top = z
                pos += n >> 1
                if n == prev:
                    streak += 1
                    if streak == _RUN_START:
                        break
                else:
                    prev = n
                    streak = 0
            done += walked
            if done < count:
                if isinstance(data, memoryview) and prev < 0x4000:
                    # a run to read: strided slices of a memoryview are far slower than one
                    # copy (records of 8 KiB and more are never read as runs: no copy)
                    data = bytes(data)
                pos, run, z = _run(data, pos, count - done, prev, hint)
                done += run
                if z > top:
                    top = z
    except IndexError:
        raise CorruptRecordError(f"records run past the end of their {end} bytes") from None
    if pos != end or parity & 1:
        raise CorruptRecordError(f"record lengths do not add up to the {end} bytes of records")
    return top


def _run(data: Buffer, pos: int, most: int, n: int, hint: int) -> tuple[int, int, int]:
    """Records at ``pos`` whose length is zigzag ``n``, canonically encoded: returns the position
    after them, how many, and their largest zigzag timestamp delta (0 for none)."""
    if n < 0x80:
        prefix = bytes((n,))
    elif n < 0x4000:
        prefix = bytes((n & 0x7F | 0x80, n >> 7))
    else:
        return pos, 0, 0  # records of 8 KiB and more: few per batch, walked one by one
    length = n >> 1
    width = len(prefix)
    stride = width + length
    if n & 1 or length < 2:
        return pos, 0, 0  # the per-record walk reports it
    end = len(data) if not isinstance(data, memoryview) else data.nbytes
    limit = min(most, (end - pos) // stride)
    run = 0
    probe = _FIRST_PROBE
    while run < limit:  # probes grow, so a run costs O(its length), a short one O(1)
        k = min(probe, limit - run)
        start = pos + run * stride
        stop = start + k * stride
        got = _leading(bytes(data[start:stop:stride]), prefix[0])
        if width == 2 and got:
            got = min(got, _leading(bytes(data[start + 1 : stop : stride]), prefix[1]))
        run += got
        if got < k:
            break
        probe *= 8
    if not run:
        return pos, 0, 0
    stop = pos + run * stride
    first_ts = pos + width + 1
    top = _strided_top(data, first_ts, stop, stride, run, hint)
    if top is None:
        top = 0
        for record_end in range(pos + stride, stop + 1, stride):
            z = decode_uvarint(data, record_end - length + 1, record_end, 10)[0]
            if z > top:
                top = z
    return stop, run, top


def _strided_top(
    data: Buffer, first_ts: int, stop: int, stride: int, run: int, hint: int
) -> int | None:
    """The largest zigzag delta of ``run`` equal-size records whose delta varints start at
    ``first_ts`` + k * ``stride``; None when some take 3 bytes or more (rare: deltas of hours)."""
    t1 = bytes(data[first_ts:stop:stride])
    if hint < 0x80 and not t1.translate(None, _UP_TO[hint]):
        # every delta one byte, none above the header's claim
        return _max_byte(t1, hint)
    if not t1.translate(None, _SINGLE):  # every delta fits one byte
        return _max_byte(t1)
    t2 = bytes(data[first_ts + 1 : stop : stride])
    if len(t2) != run:
        return None
    multi = int.from_bytes(t1.translate(_MULTI_MASK), "big")
    high = (int.from_bytes(t2, "big") & multi).to_bytes(run, "big")
    if high.translate(None, _SINGLE):
        return None
    hint_high = hint >> 7
    if hint_high < 0x80 and not high.translate(None, _UP_TO[hint_high]):
        top_high = _max_byte(high, hint_high)  # none above the claim's high part
    else:
        top_high = _max_byte(high)
    # Among two-byte deltas with the largest high part, the largest low part.
    at_top = int.from_bytes(high.translate(_equal_mask(top_high)), "big") & multi
    low = (int.from_bytes(t1.translate(_LOW7), "big") & at_top).to_bytes(run, "big")
    hint_low = hint & 0x7F
    if top_high == hint_high and not low.translate(None, _UP_TO[hint_low]):
        two_byte = _max_byte(low, hint_low) | top_high << 7
    else:
        two_byte = _max_byte(low) | top_high << 7
    if top_high:
        return two_byte  # two bytes with a non-zero high part beat any one-byte delta
    # only non-canonical two-byte varints (a hostile writer's): compare with the one-byte ones
    return max(two_byte, _max_byte(t1.translate(_SINGLE_OR_ZERO)))


def _leading(data: bytes, byte: int) -> int:
    """How many bytes at the start of ``data`` equal ``byte``: one memcmp when all do, else a
    big-int XOR whose highest set bit is the first difference (``lstrip`` would cost a memchr
    per byte)."""
    size = len(data)
    same = bytes((byte,)) * size
    if data == same:
        return size
    diff = int.from_bytes(data, "big") ^ int.from_bytes(same, "big")
    return size - ((diff.bit_length() + 7) >> 3)


def _max_byte(data: bytes, hi: int = 255) -> int:
    """The largest byte of ``data``, known to be at most ``hi`` (0 if empty): ``hi`` itself if
    present (an honest header's claim: one memchr), else bisection on C-speed deletes."""
    if bytes((hi,)) in data:
        return hi
    hi -= 1
    lo = 0
    while lo < hi:
        mid = (lo + hi) >> 1
        if data.translate(None, _UP_TO[mid]):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _equal_mask(value: int) -> bytearray:
    table = bytearray(256)
    table[value] = 0xFF
    return table


def timestamp_delta_range(data: Buffer, count: int) -> tuple[int, int]:
    """(smallest, largest) timestamp delta of the ``count`` records in ``data`` (uncompressed)."""
    end = len(data) if not isinstance(data, memoryview) else data.nbytes
    pos = 0
    lo = hi = 0
    first = True
    for index in range(count):
        if pos >= end:
            raise CorruptRecordError(f"declares {count} records but the data ends after {index}")
        z, pos = decode_uvarint(data, pos, end)
        length = (z >> 1) ^ -(z & 1)
        body_end = pos + length
        if length < 2 or body_end > end:
            raise CorruptRecordError(f"record {index} has a bad length {length}")
        z, _ = decode_uvarint(data, pos + 1, body_end, 10)
        delta = (z >> 1) ^ -(z & 1)
        if first:
            lo = hi = delta
            first = False
        elif delta > hi:
            hi = delta
        elif delta < lo:
            lo = delta
        pos = body_end
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the {count} declared records")
    return lo, hi


def records_max_timestamp(view: BatchView, data: Buffer | None = None) -> int:
    """The batch's max timestamp as Kafka's leader computes it for CreateTime: the largest
    record timestamp, or -1 (``NO_TIMESTAMP``) when no record has a larger one.

    ``data`` is the record section if the caller already has it (decompressed).
    """
    count = view.record_count
    if count <= 0:
        return NO_TIMESTAMP
    if data is None:
        data = record_data(view)
    base = view.base_timestamp
    return max(NO_TIMESTAMP, base + max_timestamp_delta(data, count, view.max_timestamp - base))


def header_max_timestamp_suspect(view: BatchView) -> bool:
    """Whether the header's max timestamp needs checking against the records (see below)."""
    return max_timestamp_suspect(view.attributes, view.base_timestamp, view.max_timestamp)


def max_timestamp_suspect(attributes: int, base_timestamp: int, max_timestamp: int) -> bool:
    """Whether a CreateTime header's max timestamp needs checking against the records: it is
    below the base timestamp (a record's own, so never legitimate), or the base is negative, as
    when the first record has no timestamp (librdkafka then claims 0 if none has one). A
    LogAppendTime max is the broker's own stamp, the records' time by definition."""
    if attributes & TIMESTAMP_TYPE_MASK:
        return False
    return max_timestamp < base_timestamp or base_timestamp < 0
