"""Record batches (magic 2): zero-copy views, scanning, codecs, builders, control records.

Hot paths use ``BatchView``/``scan_batches`` and the header patchers; ``iter_records`` and the
builders are for tools, tests, control records and internal topics.
"""

from .batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchView,
    set_base_offset,
    set_partition_leader_epoch,
)
from .builder import Record, build_batch, encode_records
from .codecs import DEFAULT_MAX_DECOMPRESSED, Compression, compress, decompress
from .control import (
    UNKNOWN_COORDINATOR_EPOCH,
    ControlRecord,
    ControlType,
    build_end_txn_marker,
    build_mirror_pid_reset,
    control_key,
    end_txn_marker_value,
    mirror_pid_reset_value,
    parse_control_record,
    read_control_batch,
)
from .iterate import DecodedRecord, iter_records
from .scan import Summary, TruncatedBatchError, scan_batches, summarize, valid_prefix

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "UNKNOWN_COORDINATOR_EPOCH",
    "BatchView",
    "Compression",
    "ControlRecord",
    "ControlType",
    "DecodedRecord",
    "Record",
    "Summary",
    "TruncatedBatchError",
    "build_batch",
    "build_end_txn_marker",
    "build_mirror_pid_reset",
    "compress",
    "control_key",
    "decompress",
    "encode_records",
    "end_txn_marker_value",
    "iter_records",
    "mirror_pid_reset_value",
    "parse_control_record",
    "read_control_batch",
    "scan_batches",
    "set_base_offset",
    "set_partition_leader_epoch",
    "summarize",
    "valid_prefix",
]
