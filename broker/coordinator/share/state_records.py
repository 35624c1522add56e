"""`__share_group_state` records, Kafka 4.1's layout and framing (as every coordinator topic).

key   = int16 record type 0 (ShareSnapshot) + ShareSnapshotKey (group id, topic id, partition)
value = int16 version 0 + ShareSnapshotValue (flexible), or None (tombstone)

Only whole snapshots are written (Kafka also writes ShareUpdate deltas, record type 1, between
snapshots); compaction keeps the latest per share-partition. Other record types decode to None
so a log holding them still loads.
"""

import uuid
from dataclasses import dataclass

from kio.static.primitive import i8, i16, i32, i64

from protocol.generated.share_snapshot_key.v0.data import ShareSnapshotKey
from protocol.generated.share_snapshot_value.v0.data import ShareSnapshotValue, StateBatch

from ..record_framing import I16, RecordFormatError, decode_prefixed, encode_prefixed

SHARE_SNAPSHOT = 0


@dataclass(frozen=True, slots=True)
class ShareKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class PersistedBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # 0 available, 2 acknowledged, 4 archived
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[PersistedBatch, ...] = ()
    snapshot_epoch: int = 0
    create_timestamp: int = 0
    write_timestamp: int = 0


def snapshot_key(k: ShareKey) -> bytes:
    return encode_prefixed(
        SHARE_SNAPSHOT,
        ShareSnapshotKey(group_id=k.group_id, topic_id=k.topic_id, partition=i32(k.partition)),
    )


def snapshot_value(s: ShareSnapshot) -> bytes:
    return encode_prefixed(
        0,
        ShareSnapshotValue(
            snapshot_epoch=i32(s.snapshot_epoch),
            state_epoch=i32(s.state_epoch),
            leader_epoch=i32(s.leader_epoch),
            start_offset=i64(s.start_offset),
            create_timestamp=i64(s.create_timestamp),
            write_timestamp=i64(s.write_timestamp),
            state_batches=tuple(
                StateBatch(
                    first_offset=i64(b.first_offset),
                    last_offset=i64(b.last_offset),
                    delivery_state=i8(b.delivery_state),
                    delivery_count=i16(b.delivery_count),
                )
                for b in s.batches
            ),
        ),
    )


def decode_key(key: bytes) -> ShareKey | None:
    """The share-partition of a ShareSnapshot record; None for another record type."""
    if len(key) < 2:
        raise RecordFormatError("record key shorter than its type")
    (record_type,) = I16.unpack_from(key)
    if record_type != SHARE_SNAPSHOT:
        return None
    k = decode_prefixed(ShareSnapshotKey, key)
    if k.topic_id is None:
        raise RecordFormatError("share state record key without a topic id")
    return ShareKey(k.group_id, k.topic_id, int(k.partition))


def decode_value(value: bytes) -> ShareSnapshot:
    if len(value) < 2 or I16.unpack_from(value)[0] != 0:
        raise RecordFormatError("unknown ShareSnapshotValue version")
    v = decode_prefixed(ShareSnapshotValue, value)
    return ShareSnapshot(
        state_epoch=int(v.state_epoch),
        leader_epoch=int(v.leader_epoch),
        start_offset=int(v.start_offset),
        batches=tuple(
            PersistedBatch(
                int(b.first_offset),
                int(b.last_offset),
                int(b.delivery_state),
                int(b.delivery_count),
            )
            for b in v.state_batches
        ),
        snapshot_epoch=int(v.snapshot_epoch),
        create_timestamp=int(v.create_timestamp),
        write_timestamp=int(v.write_timestamp),
    )
