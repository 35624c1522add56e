"""Exceptions the log layer raises, carrying the Kafka error code the API layer should answer with."""

from __future__ import annotations

from typing import Final

# Kafka error codes used here (plain ints so this layer needs no protocol enum).
OFFSET_OUT_OF_RANGE: Final = 1
CORRUPT_MESSAGE: Final = 2
MESSAGE_TOO_LARGE: Final = 10
RECORD_LIST_TOO_LARGE: Final = 18
INVALID_TIMESTAMP: Final = 32
KAFKA_STORAGE_ERROR: Final = 56
INVALID_RECORD: Final = 87


class LogError(Exception):
    """Base of the log layer's errors."""


class LogAppendError(LogError):
    """An append was refused; ``error_code`` is what a Produce response should carry."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class RecordValidationError(LogAppendError):
    """Records of a batch broke a per-record rule (KIP-467): the whole batch is refused, and
    ``record_errors`` lists ``(index in the batch, message)`` for each offending record."""

    def __init__(
        self, error_code: int, message: str, record_errors: tuple[tuple[int, str], ...]
    ) -> None:
        super().__init__(error_code, message)
        self.record_errors = record_errors


class UnexpectedAppendOffsetError(LogAppendError):
    """A raw (replicated/mirrored) append starts below the log end offset."""

    def __init__(self, first_offset: int, log_end_offset: int) -> None:
        super().__init__(
            INVALID_RECORD,
            f"unexpected offset in raw append: first offset {first_offset} is below "
            f"the log end offset {log_end_offset}",
        )
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class OffsetOutOfRange(LogError):
    """A read or DeleteRecords offset lies outside ``[log_start, log_end]``."""

    error_code: Final = OFFSET_OUT_OF_RANGE

    def __init__(self, log_start: int, log_end: int, offset: int | None = None) -> None:
        where = "" if offset is None else f"offset {offset} "
        super().__init__(f"{where}out of range [{log_start}, {log_end}]")
        self.log_start = log_start
        self.log_end = log_end
        self.offset = offset


class CorruptIndexError(LogError):
    """An index file fails its sanity check; the segment's indexes are rebuilt."""
