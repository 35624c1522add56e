"""One partition's log: an ordered list of segments plus offsets, epochs and policies.

Semantics follow Kafka's UnifiedLog/LocalLog/LogLoader (see docs in each method). Batches
stay bytes: a leader append is one copy into a bytearray (to patch base offset and partition
leader epoch in place) and one ``pwrite``; a raw append writes the caller's bytes unchanged.
Not thread-safe: call from one thread (the event loop).

Transactions (once ``load_producer_state`` attached a ``ProducerStateManager``): every append
(leader, raw/mirror, markers) updates the producer state; an ABORT marker adds an entry to the
segment's ``.txnindex``; the last stable offset is min(HW, first unstable offset) and follows
appends, HW moves, truncation and the log start. Recovery rebuilds index entries from the log.

Modules: ``state`` (what the log holds, its properties), ``loading`` (open and recover),
``append``, ``flush`` (roll, inline and background flushes), ``read`` (Fetch, timestamps,
epochs), ``producer_replay`` (replay, .txnindex upkeep), ``truncation``, ``retention``
(DeleteRecords, retention, compacted segments swapped in) and ``lifecycle`` (the composed
``PartitionLog``: open, close, delete, move).
"""

from .append import AppendResult, DuplicateInfo
from .lifecycle import PartitionLog
from .read import ReadResult
from .state import partition_dir_name

__all__ = [
    "AppendResult",
    "DuplicateInfo",
    "PartitionLog",
    "ReadResult",
    "partition_dir_name",
]
