"""Producer sequence numbers: the sentinels batches carry and the wrapping arithmetic.

Sequences wrap from INT32_MAX to 0, so "the next one" and "n before" are not plain +/-.
"""

from __future__ import annotations

from typing import Final

from protocol.records import BatchView

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_TIMESTAMP: Final = -1
INT32_MAX: Final = 0x7FFFFFFF


# -- sequence arithmetic (sequences wrap from INT32_MAX to 0) ---------------------------------
def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def last_sequence(batch: BatchView) -> int:
    base = batch.base_sequence
    if base == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(base, batch.last_offset_delta)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)
