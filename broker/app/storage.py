"""The node's storage: the log dirs (crash recovery runs as they open), the thread their appends
are written by, the cleaner, and the dir of the metadata log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import topic_configs
from ..config.server_config import ServerConfig
from ..controller.config_secrets import ConfigSecrets
from ..controller.fd_budget import ReplicaBudget
from ..log import file_cache
from ..log.cleaner import CleanerConfig, LogCleaner
from ..log.clock import Clock
from ..log.config import LogConfig
from ..log.log_writer import INLINE_BYTES, ThreadedWriter
from ..log.manager import LogManager, LogSchedule
from ..metadata.bootstrap import read_bootstrap
from ..security import password_encoder

log = logging.getLogger("kmirror")


@dataclass(frozen=True, slots=True)
class Storage:
    """What `build_storage` made."""

    config_secrets: ConfigSecrets
    bootstrap_records: list[Any]  # bootstrap.checkpoint (kafka-storage.sh format --add-scram)
    default_log_config: LogConfig
    replica_budget: ReplicaBudget | None
    log_writer: ThreadedWriter
    logs: LogManager
    cleaner: LogCleaner
    meta_logs: LogManager  # the metadata log's: ``logs`` when its dir is one of theirs


def build_storage(
    config: ServerConfig, clock: Clock, writable: Callable[[str, int], bool]
) -> Storage:
    """The log dirs (crash recovery runs here), their cleaner, the metadata log's dir.
    ``writable``: may the partition be written (KIP-1279: not a read-only mirror partition)."""
    # secrets at rest: encoded in ConfigRecords, decoded into the image
    config_secrets = ConfigSecrets(password_encoder.from_config(config))
    # kafka-storage.sh format --add-scram: written by the first active controller, trusted
    # for SASL until the cluster's metadata holds them
    bootstrap_records = read_bootstrap(config.metadata_log_dir)  # or BootstrapError
    default_log_config = topic_configs.log_config(config, {})
    log_dirs = [Path(d) for d in config.log_dirs]
    # One descriptor per partition at rest plus a bounded cache: the budget CreateTopics
    # and CreatePartitions are checked against (controller/fd_budget).
    budget = file_cache.configure(config.log_max_open_files)
    schedule = LogSchedule(
        retention_check_ms=config.log_retention_check_interval_ms,
        recovery_checkpoint_ms=config.log_flush_offset_checkpoint_interval_ms,
        start_checkpoint_ms=config.log_flush_start_offset_checkpoint_interval_ms,
        hw_checkpoint_ms=config.replica_high_watermark_checkpoint_interval_ms,
        producer_expiry_check_ms=config.producer_id_expiration_check_interval_ms,
    )
    # Appends are written by one thread, so the loop never waits for the disk (log_writer).
    log_writer = ThreadedWriter(inline_bytes=writer_inline_bytes())
    logs = LogManager(log_dirs, default_log_config, clock, schedule=schedule, writer=log_writer)
    # KIP-1279: a read-only mirror partition stays byte-identical to its source; and, as
    # Kafka pauses it, the cleaner leaves a partition alone while it moves to another dir.
    cleaner = LogCleaner(
        logs,
        CleanerConfig(
            config.log_cleaner_enable,
            config.log_cleaner_backoff_ms,
            config.log_cleaner_threads,
            config.log_cleaner_io_max_bytes_per_second,
            config.log_cleaner_dedupe_buffer_size,
            config.log_cleaner_io_buffer_load_factor,
        ),
        clock,
        may_clean=lambda topic, partition: (
            writable(topic, partition) and logs.moves.get(topic, partition) is None
        ),
    )
    meta_dir = Path(config.metadata_log_dir)
    return Storage(
        config_secrets=config_secrets,
        bootstrap_records=bootstrap_records,
        default_log_config=default_log_config,
        replica_budget=None if budget is None else ReplicaBudget(*budget),
        log_writer=log_writer,
        logs=logs,
        cleaner=cleaner,
        meta_logs=(
            logs
            if meta_dir in log_dirs
            else LogManager([meta_dir], default_log_config, clock, schedule=schedule)
        ),
    )


def writer_inline_bytes() -> int:
    """``KMIRROR_WRITER_INLINE_BYTES``: appends up to this size go straight to the file while
    the writer thread is idle (default 64 KiB). The fault tests set 0 so every append goes
    through the thread, the path a busy node takes."""
    value = os.environ.get("KMIRROR_WRITER_INLINE_BYTES")
    if value is None:
        return INLINE_BYTES
    try:
        return max(0, int(value))
    except ValueError:
        log.warning("KMIRROR_WRITER_INLINE_BYTES=%r is not a number: ignored", value)
        return INLINE_BYTES
