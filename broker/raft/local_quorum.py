"""A one-voter metadata quorum over the local ``__cluster_metadata-0`` log.

With a single voter, "committed" means "appended and fsynced": there is nobody to replicate to.
Records are written as Kafka's raft layer writes them (one record batch per append, null keys,
values framed by `protocol.metadata_records`), so Kafka's own tools can read the log.
"""

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from protocol.metadata_records import decode_metadata_record, encode_metadata_record
from protocol.records import Record, build_batch, iter_records, scan_batches

log = logging.getLogger(__name__)


class LocalQuorum:
    def __init__(self, log: Any, epoch: int, now_ms: Callable[[], int]) -> None:
        self._log = log
        self._epoch = epoch
        self._now_ms = now_ms
        self._lock = asyncio.Lock()

    @property
    def end_offset(self) -> int:
        return int(self._log.log_end_offset)

    def replay(self) -> list[tuple[int, Any]]:
        """Every committed record with its offset, oldest first (start-up only: iterates records)."""
        out: list[tuple[int, Any]] = []
        offset = self._log.log_start_offset
        end = self._log.log_end_offset
        while offset < end:
            result = self._log.read(offset, 1 << 20, upper_bound=end)
            progressed = False
            for buf in result.records:
                for batch in scan_batches(buf, allow_partial_tail=True):
                    if batch.last_offset < offset:
                        continue
                    if batch.is_control:
                        offset = batch.last_offset + 1
                        progressed = True
                        continue
                    for rec in iter_records(batch):
                        if rec.value is not None and rec.offset >= offset:
                            out.append((rec.offset, decode_metadata_record(rec.value)))
                    offset = batch.last_offset + 1
                    progressed = True
            if not progressed:
                break
        return out

    async def append(self, records: Sequence[Any]) -> int:
        """Append records atomically as one batch; returns the offset of the last one."""
        if not records:
            return self.end_offset - 1
        batch = build_batch(
            [Record(key=None, value=encode_metadata_record(r)) for r in records],
            partition_leader_epoch=self._epoch,
            base_timestamp=self._now_ms(),
        )
        async with self._lock:
            result = self._log.append_as_leader(batch, self._epoch, now_ms=self._now_ms())
            self._log.flush()
            self._log.high_watermark = self._log.log_end_offset
        return int(result.last_offset)
