"""`__transaction_state` record framing, Kafka's TransactionLog layout.

key   = int16 version 0 + TransactionLogKey {TransactionalId}
value = int16 version + TransactionLogValue, or None (a tombstone: the id expired)

Values are written as version 0, what Kafka writes while the transaction.version feature is 0
(ours); versions 0 and 1 are read. Partitions are null in the Empty state, grouped by topic
otherwise. A key of another version decodes to None and is skipped, as Kafka does.
"""

import datetime

from kio.static.primitive import i8, i16, i32, i32Timedelta, i64, i64Timedelta

from protocol.generated.transaction_log_key.v0.data import TransactionLogKey
from protocol.generated.transaction_log_value.v0 import data as v0
from protocol.generated.transaction_log_value.v1 import data as v1

from ..record_framing import I16, RecordFormatError, decode_prefixed, encode_prefixed
from .metadata import NO_PRODUCER_EPOCH, TxnState, TxnTransit

KEY_VERSION = 0
VALUE_VERSION = 0
_VALUES: dict[int, type] = {0: v0.TransactionLogValue, 1: v1.TransactionLogValue}
_MS = datetime.timedelta(milliseconds=1)


def _ms64(ms: int) -> i64Timedelta:
    return i64Timedelta.parse(datetime.timedelta(milliseconds=ms))


def txn_key(transactional_id: str) -> bytes:
    return encode_prefixed(KEY_VERSION, TransactionLogKey(transactional_id=transactional_id))


def decode_key(key: bytes) -> str | None:
    """The transactional id, or None for a key version this coordinator does not know."""
    if len(key) < 2:
        raise RecordFormatError("record key shorter than its version")
    (version,) = I16.unpack_from(key)
    if version != KEY_VERSION:
        return None
    return str(decode_prefixed(TransactionLogKey, key).transactional_id)


def txn_value(t: TxnTransit) -> bytes:
    if t.state == TxnState.EMPTY and t.partitions:
        raise ValueError(f"an Empty transaction has no partitions: {t}")
    partitions: tuple[v0.PartitionsSchema, ...] | None = None
    if t.state != TxnState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = tuple(
            v0.PartitionsSchema(topic=topic, partition_ids=tuple(i32(p) for p in ids))
            for topic, ids in by_topic.items()
        )
    return encode_prefixed(
        VALUE_VERSION,
        v0.TransactionLogValue(
            producer_id=i64(t.producer_id),
            producer_epoch=i16(t.producer_epoch),
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=t.timeout_ms)),
            transaction_status=i8(int(t.state)),
            transaction_partitions=partitions,
            transaction_last_update_timestamp=_ms64(t.update_ms),
            transaction_start_timestamp=_ms64(t.start_ms),
        ),
    )


def decode_value(value: bytes) -> TxnTransit:
    if len(value) < 2:
        raise RecordFormatError("record value shorter than its version")
    (version,) = I16.unpack_from(value)
    entity = _VALUES.get(version)
    if entity is None:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    v = decode_prefixed(entity, value)
    try:
        state = TxnState(int(v.transaction_status))
    except ValueError:
        raise RecordFormatError(f"unknown transaction state {v.transaction_status}") from None
    if state == TxnState.PREPARE_EPOCH_FENCE:
        raise RecordFormatError("PrepareEpochFence is never written")
    partitions: frozenset[tuple[str, int]] = frozenset()
    if state != TxnState.EMPTY and v.transaction_partitions:
        partitions = frozenset(
            (ps.topic, int(p)) for ps in v.transaction_partitions for p in ps.partition_ids
        )
    return TxnTransit(
        producer_id=int(v.producer_id),
        prev_producer_id=int(getattr(v, "previous_producer_id", -1)),
        producer_epoch=int(v.producer_epoch),
        last_producer_epoch=NO_PRODUCER_EPOCH,
        timeout_ms=v.transaction_timeout // _MS,
        state=state,
        partitions=partitions,
        start_ms=v.transaction_start_timestamp // _MS,
        update_ms=v.transaction_last_update_timestamp // _MS,
    )
