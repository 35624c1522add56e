"""`__mirror_state` record framing (KIP-1279), the same framing as every Kafka coordinator topic.

key   = int16 record type + key struct (version 0, not flexible)
value = int16 value version + value struct (version 0, flexible), or None (tombstone)

Record type 1 is LastMirrorEpochsKey/Value, type 2 MirrorPartitionStateKey/Value; both keys are
(mirror name, topic id, partition), so compaction keeps one value of each kind per partition.
Record types written by someone else decode to None, so a log with them still loads.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from kio.static.primitive import i8, i32

from protocol.generated.last_mirror_epochs_key.v0.data import LastMirrorEpochsKey
from protocol.generated.last_mirror_epochs_value.v0.data import LastMirrorEpochsValue
from protocol.generated.mirror_partition_state_key.v0.data import MirrorPartitionStateKey
from protocol.generated.mirror_partition_state_value.v0.data import MirrorPartitionStateValue

from ..record_framing import I16, RecordFormatError, decode_prefixed, encode_prefixed

LAST_MIRROR_EPOCHS = 1
MIRROR_PARTITION_STATE = 2


@dataclass(frozen=True, slots=True)
class MirrorKey:
    """A mirror partition: what every `__mirror_state` record is about."""

    mirror: str
    topic_id: uuid.UUID
    partition: int


def epoch_key(k: MirrorKey) -> bytes:
    return encode_prefixed(
        LAST_MIRROR_EPOCHS,
        LastMirrorEpochsKey(mirror_name=k.mirror, topic_id=k.topic_id, partition=i32(k.partition)),
    )


def state_key(k: MirrorKey) -> bytes:
    return encode_prefixed(
        MIRROR_PARTITION_STATE,
        MirrorPartitionStateKey(
            mirror_name=k.mirror, topic_id=k.topic_id, partition=i32(k.partition)
        ),
    )


def epoch_value(epoch: int) -> bytes:
    return encode_prefixed(0, LastMirrorEpochsValue(last_mirror_epoch=i32(epoch)))


def state_value(state: int) -> bytes:
    return encode_prefixed(0, MirrorPartitionStateValue(state=i8(state)))


def decode_key(key: bytes) -> tuple[int, MirrorKey] | None:
    """(record type, key), or None for a record type this coordinator does not own."""
    if len(key) < 2:
        raise RecordFormatError("record key shorter than its type")
    (record_type,) = I16.unpack_from(key)
    if record_type == LAST_MIRROR_EPOCHS:
        k: Any = decode_prefixed(LastMirrorEpochsKey, key)
    elif record_type == MIRROR_PARTITION_STATE:
        k = decode_prefixed(MirrorPartitionStateKey, key)
    else:
        return None
    if k.topic_id is None:
        raise RecordFormatError("mirror record key without a topic id")
    return record_type, MirrorKey(k.mirror_name, k.topic_id, int(k.partition))


def _check_version(value: bytes) -> None:
    if len(value) < 2:
        raise RecordFormatError("record value shorter than its version")
    (version,) = I16.unpack_from(value)
    if version != 0:
        raise RecordFormatError(f"unknown value version {version}")


def decode_epoch_value(value: bytes) -> int:
    _check_version(value)
    return int(decode_prefixed(LastMirrorEpochsValue, value).last_mirror_epoch)


def decode_state_value(value: bytes) -> int:
    _check_version(value)
    return int(decode_prefixed(MirrorPartitionStateValue, value).state)
