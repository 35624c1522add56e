"""Zero-allocation-surprise parser for Fetch requests v4-v19 (the consumer and mirror hot path).

Hand-written for two reasons: speed (a consumer sends one per poll), and safety — every array
count is checked against the bytes left before anything is built, so a forged count cannot make
the process allocate gigabytes (kio's native reader reserves first and checks later).
Unknown tagged fields are skipped. Field layout by version follows Kafka's FetchRequest.json.
"""

import struct
import uuid
from dataclasses import dataclass, field
from typing import Final

from ..errors import DecodeError, TruncatedError
from ..readers import Buffer, read_fixed, read_uvarint, skip_tagged_fields
from .request_readers import I32, read_count, read_text, topic_id_of

MIN_VERSION: Final = 4
MAX_VERSION: Final = 19
# kmirror's synchronous mirroring fields (docs/protocol.md): far above Kafka's own tags
MIRROR_SYNC_TAG: Final = 1279
_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I64: Final = struct.Struct(">q")
_PART_V12: Final = struct.Struct(
    ">iiqiqi"
)  # partition, current epoch, offset, last fetched epoch, log start, max bytes


@dataclass(slots=True)
class FetchPartitionView:
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    mirror_leader_epoch: int = -1  # v19 tag 2 (KIP-1279)
    mirror_committed_offset: int = -1  # v19 tag 1279 (kmirror synchronous mirroring)


@dataclass(slots=True)
class FetchTopicView:
    topic: str | None  # v4-v12
    topic_id: uuid.UUID | None  # v13+
    partitions: list[FetchPartitionView]


@dataclass(slots=True)
class ForgottenTopicView:
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[int]


@dataclass(slots=True)
class FetchRequestView:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopicView]
    forgotten_topics_data: list[ForgottenTopicView] = field(default_factory=list)
    rack_id: str = ""
    cluster_id: str | None = None
    replica_epoch: int = -1  # ReplicaState.ReplicaEpoch (v15+): the follower's broker epoch
    mirror_sync_id: str | None = None  # v19 tag 1279: a kmirror mirror reporting its commits


def parse_fetch_request(buf: Buffer, offset: int, version: int) -> FetchRequestView:
    """Parse a Fetch request body starting at ``offset`` (just after the request header)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch: version {version} outside {MIN_VERSION}-{MAX_VERSION}")
    try:
        return _parse(buf, offset, version)
    except (DecodeError, TruncatedError) as e:
        raise type(e)(f"fetch request: {e}") from None


def _string(mv: memoryview, pos: int, n: int, flexible: bool, what: str) -> tuple[str | None, int]:
    if flexible:
        length, pos = read_uvarint(mv, pos, f"{what} length")
        length -= 1
    else:
        length, pos = read_fixed(_I16, mv, pos, f"{what} length")
    if length < 0:
        return None, pos
    return read_text(mv, pos, n, length, what)


def _uuid(mv: memoryview, pos: int, n: int) -> tuple[uuid.UUID | None, int]:
    if pos + 16 > n:
        raise TruncatedError(f"buffer ends inside topic_id at byte {pos}")
    raw = mv[pos : pos + 16].tobytes()
    return (None if raw == bytes(16) else topic_id_of(raw)), pos + 16


def _partition_tags(mv: memoryview, pos: int, n: int, p: FetchPartitionView, version: int) -> int:
    if pos < n and mv[pos] == 0:
        return pos + 1
    count, pos = read_uvarint(mv, pos, "partition tagged field count")
    for _ in range(count):
        tag, pos = read_uvarint(mv, pos, "partition tag")
        size, pos = read_uvarint(mv, pos, "partition tagged field size")
        if pos + size > n:
            raise TruncatedError(f"partition tagged field {tag} of {size} bytes runs past the end")
        if tag == 2 and size == 4:
            p.mirror_leader_epoch = I32.unpack_from(mv, pos)[0]
        elif tag == MIRROR_SYNC_TAG and size == 8 and version >= 19:
            p.mirror_committed_offset = _I64.unpack_from(mv, pos)[0]
        pos += size
    return pos


def _parse(buf: Buffer, pos: int, version: int) -> FetchRequestView:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    n = len(mv)
    flexible = version >= 12
    by_id = version >= 13
    replica_id = -1
    replica_epoch = -1
    if version <= 14:
        replica_id, pos = read_fixed(I32, mv, pos, "replica_id")
    max_wait, pos = read_fixed(I32, mv, pos, "max_wait_ms")
    min_bytes, pos = read_fixed(I32, mv, pos, "min_bytes")
    max_bytes, pos = read_fixed(I32, mv, pos, "max_bytes")
    isolation, pos = read_fixed(_I8, mv, pos, "isolation_level")
    session_id = 0
    session_epoch = -1
    if version >= 7:
        session_id, pos = read_fixed(I32, mv, pos, "session_id")
        session_epoch, pos = read_fixed(I32, mv, pos, "session_epoch")
    count, pos = read_count(mv, pos, n, flexible, "topics")
    topics: list[FetchTopicView] = []
    for _ in range(count):
        name: str | None = None
        tid: uuid.UUID | None = None
        if by_id:
            tid, pos = _uuid(mv, pos, n)
        else:
            name, pos = _string(mv, pos, n, flexible, "topic")
            if name is None:
                raise DecodeError("topic name is null")
        pcount, pos = read_count(mv, pos, n, flexible, "partitions")
        parts: list[FetchPartitionView] = []
        for _ in range(pcount):
            if version >= 12:
                if pos + _PART_V12.size > n:
                    raise TruncatedError(f"buffer ends inside a fetch partition at byte {pos}")
                partition, cur, off, last, start, pmax = _PART_V12.unpack_from(mv, pos)
                pos += _PART_V12.size
                p = FetchPartitionView(partition, off, pmax, cur, last, start)
                pos = _partition_tags(mv, pos, n, p, version)
            else:
                partition, pos = read_fixed(I32, mv, pos, "partition")
                cur = -1
                if version >= 9:
                    cur, pos = read_fixed(I32, mv, pos, "current_leader_epoch")
                off, pos = read_fixed(_I64, mv, pos, "fetch_offset")
                start = -1
                if version >= 5:
                    start, pos = read_fixed(_I64, mv, pos, "log_start_offset")
                pmax, pos = read_fixed(I32, mv, pos, "partition_max_bytes")
                p = FetchPartitionView(partition, off, pmax, cur, -1, start)
            parts.append(p)
        if flexible:
            pos = skip_tagged_fields(mv, pos, "topic tagged fields")
        topics.append(FetchTopicView(name, tid, parts))
    forgotten: list[ForgottenTopicView] = []
    if version >= 7:
        count, pos = read_count(mv, pos, n, flexible, "forgotten_topics_data")
        for _ in range(count):
            fname: str | None = None
            ftid: uuid.UUID | None = None
            if by_id:
                ftid, pos = _uuid(mv, pos, n)
            else:
                fname, pos = _string(mv, pos, n, flexible, "forgotten topic")
            icount, pos = read_count(mv, pos, n, flexible, "forgotten partitions")
            if pos + 4 * icount > n:
                raise TruncatedError(
                    f"forgotten partitions: {icount} declared, {n - pos} bytes remain"
                )
            ids = list(struct.unpack_from(f">{icount}i", mv, pos))
            pos += 4 * icount
            if flexible:
                pos = skip_tagged_fields(mv, pos, "forgotten topic tagged fields")
            forgotten.append(ForgottenTopicView(fname, ftid, ids))
    rack = ""
    if version >= 11:
        rack_or_none, pos = _string(mv, pos, n, flexible, "rack_id")
        rack = rack_or_none or ""
    cluster_id: str | None = None
    sync_id: str | None = None
    if flexible:
        tcount, pos = read_uvarint(mv, pos, "request tagged field count")
        for _ in range(tcount):
            tag, pos = read_uvarint(mv, pos, "request tag")
            size, pos = read_uvarint(mv, pos, "request tagged field size")
            end = pos + size
            if end > n:
                raise TruncatedError(
                    f"request tagged field {tag} of {size} bytes runs past the end"
                )
            if tag == 0:
                cluster_id, _ = _string(mv[:end], pos, end, True, "cluster_id")
            elif tag == 1 and size >= 12:  # ReplicaState (v15+): ReplicaId, ReplicaEpoch
                replica_id = I32.unpack_from(mv, pos)[0]
                replica_epoch = _I64.unpack_from(mv, pos + 4)[0]
            elif tag == MIRROR_SYNC_TAG and version >= 19:
                sync_id, _ = _string(mv[:end], pos, end, True, "mirror_sync_id")
            pos = end
    return FetchRequestView(
        replica_id,
        max_wait,
        min_bytes,
        max_bytes,
        isolation,
        session_id,
        session_epoch,
        topics,
        forgotten,
        rack,
        cluster_id,
        replica_epoch,
        sync_id,
    )
