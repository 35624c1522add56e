"""Which fetched control batches a mirror refuses to store.

A mirror copies the source's batches byte for byte, so whatever it stores its producer state,
LSO and failover truncation must read the way the source meant it. A control batch whose
control record cannot be decoded (no key, a short key, corrupt records) or whose type is
unknown would be stored and then ignored, which for a COMMIT/ABORT means a transaction left
open forever on the destination. The fetcher fails the partition instead (KIP-1279: a
malformed batch fails only its own partition). A COMMIT/ABORT with a null or short value is
readable: the type is in the key (see ``protocol.records.control``).
"""

from __future__ import annotations

from protocol.errors import CorruptRecordError
from protocol.records import BatchView, read_control_batch


def control_batch_problem(batch: BatchView) -> str | None:
    """Why the mirror cannot store this control batch, or None when it can."""
    try:
        control = read_control_batch(batch)
    except CorruptRecordError as exc:
        return f"unreadable control batch at offset {batch.base_offset}: {exc}"
    if control is not None and not control.is_known:
        return f"control batch at offset {batch.base_offset} has unknown type {control.type}"
    return None
