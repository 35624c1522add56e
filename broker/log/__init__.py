"""Kafka's on-disk log: segments, indexes, checkpoints, recovery, retention.

Public API: ``PartitionLog`` (one partition), ``LogManager`` (all partitions of all log
dirs), ``LogConfig`` (topic-level keys), and the errors carrying Kafka error codes.
"""

from .clock import Clock, ManualClock, SystemClock
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import LogAppendError, LogError, OffsetOutOfRange, UnexpectedAppendOffsetError
from .manager import LogManager
from .partition_log import (
    AppendResult,
    DuplicateInfo,
    PartitionLog,
    ReadResult,
)
from .producer_state import ProducerStateManager
from .validation import AppendOrigin

__all__ = [
    "AppendOrigin",
    "AppendResult",
    "Clock",
    "DuplicateInfo",
    "LeaderEpochCache",
    "LogAppendError",
    "LogConfig",
    "LogError",
    "LogManager",
    "ManualClock",
    "OffsetOutOfRange",
    "PartitionLog",
    "ProducerStateManager",
    "ReadResult",
    "SystemClock",
    "UnexpectedAppendOffsetError",
]
