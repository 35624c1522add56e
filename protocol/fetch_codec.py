"""Fetch requests (v4-v19) and a zero-copy Fetch response parser for mirror and replica fetchers.

The response parser only reads the small fixed fields; each partition's ``records`` is a
memoryview into the response frame, so mirrored batches reach the log without a copy.
Requests are small and built with the registry's types.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from protocol.errors import DecodeError, TruncatedError
from protocol.readers import read_uvarint

FETCH: Final = 1
MIN_FETCH_VERSION: Final = 4
MAX_FETCH_VERSION: Final = 19
FIRST_TOPIC_ID_VERSION: Final = 13
FIRST_FLEXIBLE_VERSION: Final = 12
READ_COMMITTED: Final = 1
CONSUMER_REPLICA_ID: Final = -1

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I32_2: Final = struct.Struct(">ii")
_I64: Final = struct.Struct(">q")
_REQ_TOP: Final = struct.Struct(">iiib")  # max_wait_ms, min_bytes, max_bytes, isolation
_TOP_V7: Final = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PART_V4: Final = struct.Struct(">ihqq")  # partition, error_code, high_watermark, lso
_PART_V5: Final = struct.Struct(">ihqqq")  # ... + log_start_offset
_EPOCH_END: Final = struct.Struct(">iq")  # diverging_epoch: epoch, end_offset
_LEADER: Final = struct.Struct(">ii")  # current_leader: leader_id, leader_epoch
# kmirror's synchronous mirroring tag (1279, far above Kafka's own) as a uvarint
_SYNC_TAG: Final = b"\xff\x09"


@dataclass(slots=True)
class FetchPartitionData:
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview
    # KIP-320/595 hints, -1 when absent.
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    current_leader_id: int = -1
    current_leader_epoch: int = -1
    mirror_leader_epoch: int = -1  # v19 tag 3 (KIP-1279)


@dataclass(slots=True)
class FetchResponseData:
    throttle_time_ms: int
    error_code: int
    session_id: int
    # (topic name or topic id, partition data); the key is a UUID from v13 on.
    partitions: list[tuple[str | uuid.UUID, FetchPartitionData]]


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic: str
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int
    mirror_leader_epoch: int = -1  # v19 tag 2 (KIP-1279): a mirror partition's follower
    # v19 tag 1279 (kmirror synchronous mirroring, with the request's ``mirror_sync_id``):
    # what the destination committed of this partition, -1: not sent
    mirror_committed_offset: int = -1


class _Cursor:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: memoryview, flexible: bool) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def need(self, n: int, what: str) -> None:
        if self.pos + n > len(self.buf):
            raise TruncatedError(f"Fetch response ends inside {what} at byte {self.pos}")

    def fixed(self, s: struct.Struct, what: str) -> tuple[Any, ...]:
        self.need(s.size, what)
        values = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return values

    def uvarint(self, what: str) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos, what)
        return value

    def array_len(self, what: str) -> int:
        """Element count; -1 for a null array."""
        if self.flexible:
            return self.uvarint(what) - 1
        return int(self.fixed(_I32, what)[0])

    def string(self, what: str) -> str:
        n = self.uvarint(what) - 1 if self.flexible else int(self.fixed(_I16, what)[0])
        if n < 0:
            raise DecodeError(f"Fetch response: null or negative {what}")
        self.need(n, what)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError(f"Fetch response: {what} is not UTF-8") from None

    def topic_id(self) -> uuid.UUID:
        self.need(16, "topic id")
        raw = bytes(self.buf[self.pos : self.pos + 16])
        self.pos += 16
        return uuid.UUID(bytes=raw)

    def blob(self, what: str) -> memoryview:
        n = self.uvarint(what) - 1 if self.flexible else int(self.fixed(_I32, what)[0])
        if n < 0:
            return self.buf[self.pos : self.pos]
        self.need(n, what)
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def skip_tags(self) -> None:
        for _ in range(self.uvarint("tag count")):
            self.uvarint("tag")
            size = self.uvarint("tag size")
            self.need(size, "tagged field")
            self.pos += size


def parse_fetch_response(body: memoryview, version: int) -> FetchResponseData:
    """Parse a Fetch response body (header already stripped); records stay views into ``body``."""
    if not MIN_FETCH_VERSION <= version <= MAX_FETCH_VERSION:
        raise ValueError(f"Fetch v{version} is outside {MIN_FETCH_VERSION}-{MAX_FETCH_VERSION}")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    c = _Cursor(body, flexible)
    if version >= 7:
        throttle, error, session_id = c.fixed(_TOP_V7, "response header")
    else:
        (throttle,) = c.fixed(_I32, "throttle_time_ms")
        error, session_id = 0, 0
    out: list[tuple[str | uuid.UUID, FetchPartitionData]] = []
    part_struct = _PART_V5 if version >= 5 else _PART_V4
    for _ in range(max(c.array_len("topics"), 0)):
        key: str | uuid.UUID = (
            c.topic_id() if version >= FIRST_TOPIC_ID_VERSION else c.string("topic name")
        )
        for _ in range(max(c.array_len("partitions"), 0)):
            fields = c.fixed(part_struct, "partition")
            log_start = fields[4] if version >= 5 else -1
            aborted = c.array_len("aborted transactions")
            for _ in range(max(aborted, 0)):
                c.need(16, "aborted transaction")
                c.pos += 16
                if flexible:
                    c.skip_tags()
            if version >= 11:
                c.need(4, "preferred_read_replica")
                c.pos += 4
            records = c.blob("records")
            data = FetchPartitionData(
                fields[0], fields[1], fields[2], fields[3], log_start, records
            )
            if flexible:
                _partition_tags(c, data)
            out.append((key, data))
        if flexible:
            c.skip_tags()
    if flexible:
        c.skip_tags()
    return FetchResponseData(throttle, error, session_id, out)


def _partition_tags(c: _Cursor, data: FetchPartitionData) -> None:
    for _ in range(c.uvarint("tag count")):
        tag = c.uvarint("tag")
        size = c.uvarint("tag size")
        c.need(size, "tagged field")
        end = c.pos + size
        if tag == 0 and size >= _EPOCH_END.size:
            data.diverging_epoch, data.diverging_end_offset = _EPOCH_END.unpack_from(c.buf, c.pos)
        elif tag == 1 and size >= _LEADER.size:
            data.current_leader_id, data.current_leader_epoch = _LEADER.unpack_from(c.buf, c.pos)
        elif tag == 3 and size >= _I32.size:
            data.mirror_leader_epoch = _I32.unpack_from(c.buf, c.pos)[0]
        c.pos = end


def encode_fetch_request(
    version: int,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    session_id: int,
    session_epoch: int,
    partitions: Sequence[FetchPartitionRequest],
    forgotten: Sequence[tuple[str, uuid.UUID | None, int]],
    by_topic_id: bool,
    isolation_level: int = READ_COMMITTED,
    replica_id: int = CONSUMER_REPLICA_ID,
    replica_epoch: int = -1,
    mirror_sync_id: str | None = None,
) -> bytes:
    """A Fetch request body: a consumer's (replica id -1) or a follower's (its broker id and,
    from v15, its broker epoch in ReplicaState). Written by hand (every fetcher round sends
    one); tests/protocol/test_fetch_request_encoder.py checks it byte for byte against kio's.
    ``mirror_sync_id`` (a kmirror mirror fetcher, v19): tag 1279 names the mirror, and each
    partition with a ``mirror_committed_offset`` carries it in its own tag 1279
    (docs/protocol.md)."""
    flexible = version >= 12
    by_id = version >= 13 and by_topic_id
    out = bytearray()
    if version < 15:
        out += _I32.pack(replica_id)
    out += _REQ_TOP.pack(max_wait_ms, min_bytes, max_bytes, isolation_level)
    if version >= 7:
        out += _I32_2.pack(session_id, session_epoch)
    topics: dict[Any, list[FetchPartitionRequest]] = {}
    for p in partitions:
        topics.setdefault(p.topic_id if by_id else p.topic, []).append(p)
    _length(out, len(topics), flexible)
    for key, parts in topics.items():
        _topic_key(out, key, by_id, flexible)
        _length(out, len(parts), flexible)
        for p in parts:
            out += _I32.pack(p.partition)
            if version >= 9:
                out += _I32.pack(p.current_leader_epoch)
            out += _I64.pack(p.fetch_offset)
            if version >= 12:
                out += _I32.pack(p.last_fetched_epoch)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            out += _I32.pack(p.max_bytes)
            if flexible:
                epoch = version >= 19 and p.mirror_leader_epoch != -1
                synced = (
                    version >= 19 and p.mirror_committed_offset >= 0 and mirror_sync_id is not None
                )
                out.append(epoch + synced)  # the tag count (ascending tags follow)
                if epoch:
                    out += b"\x02\x04" + _I32.pack(p.mirror_leader_epoch)  # tag 2, 4 bytes
                if synced:
                    out += _SYNC_TAG + b"\x08" + _I64.pack(p.mirror_committed_offset)
        if flexible:
            out += b"\x00"
    if version >= 7:
        forgot: dict[Any, list[int]] = {}
        for name, tid, partition in forgotten:
            forgot.setdefault(tid if by_id else name, []).append(partition)
        _length(out, len(forgot), flexible)
        for key, ids in forgot.items():
            _topic_key(out, key, by_id, flexible)
            _length(out, len(ids), flexible)
            for i in ids:
                out += _I32.pack(i)
            if flexible:
                out += b"\x00"
    if version >= 11:
        out += b"\x01" if flexible else b"\x00\x00"  # rack_id ""
    if flexible:
        state = version >= 15 and (replica_id != -1 or replica_epoch != -1)
        named = version >= 19 and mirror_sync_id is not None
        out.append(state + named)  # the tag count
        if state:
            out += b"\x01\x0d" + _I32.pack(replica_id) + _I64.pack(replica_epoch) + b"\x00"
        if named and mirror_sync_id is not None:
            raw = mirror_sync_id.encode()
            body = bytearray()
            _uvarint(body, len(raw) + 1)
            body += raw
            out += _SYNC_TAG
            _uvarint(out, len(body))
            out += body
    return bytes(out)


def _length(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _topic_key(out: bytearray, key: Any, by_id: bool, flexible: bool) -> None:
    if by_id:
        out += key.bytes if key is not None else bytes(16)
        return
    raw = key.encode()
    if flexible:
        _uvarint(out, len(raw) + 1)
    else:
        out += _I16.pack(len(raw))
    out += raw
