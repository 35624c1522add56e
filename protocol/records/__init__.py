"""Record batches (magic 2): zero-copy views, scanning, codecs, builders, control records.

Hot paths use ``BatchView``/``scan_batches`` and the header patchers; ``iter_records`` and the
builders are for tools, tests, control records and internal topics.
"""

from .batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchView,
    set_base_offset,
    set_max_timestamp,
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
from .timestamps import (
    NO_TIMESTAMP,
    header_max_timestamp_suspect,
    max_timestamp_delta,
    max_timestamp_suspect,
    record_data,
    records_max_timestamp,
    timestamp_delta_range,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "NO_TIMESTAMP",
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
    "header_max_timestamp_suspect",
    "iter_records",
    "max_timestamp_delta",
    "max_timestamp_suspect",
    "mirror_pid_reset_value",
    "parse_control_record",
    "read_control_batch",
    "record_data",
    "records_max_timestamp",
    "scan_batches",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "summarize",
    "timestamp_delta_range",
    "valid_prefix",
]
