"""Control records: transaction markers and KIP-1279's MIRROR_PID_RESET.

Key (every type): int16 version (0) + int16 type. The type is always read from the key, as
Kafka's ControlRecordType does.
End-txn marker value: int16 version (0) + int32 coordinator epoch. Some Kafka-compatible brokers
write COMMIT/ABORT with a null (or shorter) value; consumers accept those, since the type is in
the key, so they are read here as markers with an unknown coordinator epoch (-1).
MirrorPidResetRecord value (flexible from v0): int16 Version, compact string SourceClusterId,
tagged fields. The KIP's JSON lists fields at ``versions: "0"``, the prototype at ``"0+"``;
with validVersions 0 both give the same bytes.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

import msgspec

from protocol.errors import CorruptRecordError

from .batch import BatchView, Buffer
from .builder import Record, build_batch
from .iterate import iter_records
from .varint import decode_uvarint, encode_uvarint


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    # KRaft quorum records.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    # KIP-1279: written when a mirror partition stops; expires all producer state.
    MIRROR_PID_RESET = 7


CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0
MIRROR_PID_RESET_VERSION: Final = 0
# The coordinator epoch of a COMMIT/ABORT marker whose value does not carry one.
UNKNOWN_COORDINATOR_EPOCH: Final = -1

_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")
_I16 = struct.Struct(">h")


class ControlRecord(msgspec.Struct, frozen=True):
    # A ControlType, or the raw int for a type this code does not know (not an error).
    type: ControlType | int
    version: int  # key version
    value_version: int | None = None
    coordinator_epoch: int | None = None  # ABORT / COMMIT (-1 when the value lacks it)
    source_cluster_id: str | None = None  # MIRROR_PID_RESET

    @property
    def is_end_txn(self) -> bool:
        """A COMMIT or ABORT transaction marker."""
        return self.type in (ControlType.COMMIT, ControlType.ABORT)

    @property
    def is_known(self) -> bool:
        """A type this code knows (unknown ones are not errors for the parser)."""
        return isinstance(self.type, ControlType)


def control_key(control_type: int) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _END_TXN.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def mirror_pid_reset_value(source_cluster_id: str) -> bytes:
    raw = source_cluster_id.encode()
    out = bytearray(_I16.pack(MIRROR_PID_RESET_VERSION))
    encode_uvarint(len(raw) + 1, out)  # compact string: length + 1 (0 would mean null)
    out += raw
    encode_uvarint(0, out)  # no tagged fields
    return bytes(out)


def build_end_txn_marker(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    timestamp: int | None = None,
) -> bytes:
    """A COMMIT/ABORT marker batch: transactional + control, carrying the producer's id."""
    rec = Record(
        key=control_key(ControlType.COMMIT if commit else ControlType.ABORT),
        value=end_txn_marker_value(coordinator_epoch),
    )
    return build_batch(
        [rec],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        base_timestamp=timestamp,
    )


def build_mirror_pid_reset(
    source_cluster_id: str,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    timestamp: int | None = None,
) -> bytes:
    """The MIRROR_PID_RESET control batch written when a mirror partition stops.

    Control bit set, transactional bit clear, no producer id/epoch/sequence: it belongs to no
    producer (it resets them all), so it must not look like a transaction marker to the
    producer-state or LSO logic. This matches the prototype, which builds it like the KRaft
    control batches.
    """
    rec = Record(
        key=control_key(ControlType.MIRROR_PID_RESET),
        value=mirror_pid_reset_value(source_cluster_id),
    )
    return build_batch(
        [rec],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        is_control=True,
        base_timestamp=timestamp,
    )


def _parse_mirror_pid_reset(value: Buffer) -> tuple[int, str]:
    end = len(value)
    if end < 2:
        raise CorruptRecordError(f"MIRROR_PID_RESET value has {end} bytes, needs at least 3")
    (version,) = _I16.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"MIRROR_PID_RESET value has a negative version {version}")
    # Newer versions can only add tagged fields or trailing fields; read the v0 prefix.
    n, pos = decode_uvarint(value, 2, end)
    if n == 0:
        raise CorruptRecordError("MIRROR_PID_RESET SourceClusterId is null")
    n -= 1
    if pos + n > end:
        raise CorruptRecordError(
            f"MIRROR_PID_RESET SourceClusterId of {n} bytes overruns the {end}-byte value"
        )
    try:
        cluster_id = bytes(value[pos : pos + n]).decode()
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"MIRROR_PID_RESET SourceClusterId is not UTF-8: {exc}") from exc
    pos += n
    n_tags, pos = decode_uvarint(value, pos, end)
    for _ in range(n_tags):
        _, pos = decode_uvarint(value, pos, end)
        size, pos = decode_uvarint(value, pos, end)
        pos += size
        if pos > end:
            raise CorruptRecordError("MIRROR_PID_RESET tagged field overruns the value")
    return version, cluster_id


def parse_control_record(key: Buffer | None, value: Buffer | None) -> ControlRecord:
    """Decode a control record's key and, for types we know, its value."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(
            f"control record key must have at least 4 bytes, got "
            f"{'null' if key is None else len(key)}"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"control record key has a negative version {version}")
    try:
        ctype: ControlType | int = ControlType(type_id)
    except ValueError:
        return ControlRecord(type=type_id, version=version)
    if ctype in (ControlType.ABORT, ControlType.COMMIT):
        if value is None or len(value) < _END_TXN.size:
            # The key says what the marker does; only the coordinator epoch is missing.
            return ControlRecord(ctype, version, coordinator_epoch=UNKNOWN_COORDINATOR_EPOCH)
        value_version, epoch = _END_TXN.unpack_from(value, 0)
        if value_version < 0:
            raise CorruptRecordError(
                f"end transaction marker has a negative version {value_version}"
            )
        return ControlRecord(ctype, version, value_version, coordinator_epoch=epoch)
    if ctype == ControlType.MIRROR_PID_RESET:
        if value is None:
            raise CorruptRecordError("MIRROR_PID_RESET control record has a null value")
        value_version, cluster_id = _parse_mirror_pid_reset(value)
        return ControlRecord(ctype, version, value_version, source_cluster_id=cluster_id)
    # KRaft control records: their values belong to the raft layer.
    return ControlRecord(ctype, version)


def read_control_batch(batch: BatchView) -> ControlRecord | None:
    """The control record of a control batch: its first record, as Kafka reads it.

    None when the batch holds no record (compaction can empty one). Raises CorruptRecordError
    when the records or the control record cannot be decoded; an unknown type is returned
    (``is_known`` False), each caller decides what it means for it.
    """
    if batch.record_count == 0:
        return None
    record = next(iter_records(batch), None)
    if record is None:
        return None
    return parse_control_record(record.key, record.value)
