"""
Generated from ``schemas/TransactionLogValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64
from kio.static.primitive import i64Timedelta
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsSchema:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    topic: str = field(metadata={"kafka_type": "string"})
    """Topic name."""
    partition_ids: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """Partitions of the topic."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    """Producer id in use by the transactional id."""
    previous_producer_id: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(-1))
    """Producer id of the last committed transaction, -1 if none."""
    next_producer_id: i64 = field(metadata={"kafka_type": "int64", "tag": 1}, default=i64(-1))
    """Producer id handed out once the epoch of the current one runs out, -1 if none."""
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    """Epoch of the producer id."""
    transaction_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Timeout after which an open transaction is aborted."""
    transaction_status: i8 = field(metadata={"kafka_type": "int8"})
    """State: 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence."""
    transaction_partitions: tuple[PartitionsSchema, ...] | None
    """Partitions in the transaction; null in the Empty state."""
    transaction_last_update_timestamp: i64Timedelta = field(metadata={"kafka_type": "timedelta_i64"})
    """When the state last changed (ms since epoch)."""
    transaction_start_timestamp: i64Timedelta = field(metadata={"kafka_type": "timedelta_i64"})
    """When the open transaction started (ms since epoch), -1 if none."""
    client_transaction_version: i16 = field(metadata={"kafka_type": "int16", "tag": 2}, default=i16(0))
    """transaction.version the client used."""
