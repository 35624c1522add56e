"""The coordinator runtime's `RecordLog` over one partition of an internal topic.

On a single node a record is committed once appended (the high watermark follows the log end);
the write is not fsynced per commit, as Kafka does not fsync either: a process crash keeps the
page cache, and ``log.flush.*`` settings apply as for any topic.
"""

from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.records import Record, build_batch, iter_records, scan_batches

from .runtime import AppendError

READ_CHUNK = 1 << 20


class PartitionRecordLog:
    def __init__(
        self, plog: Any, leader_epoch: Callable[[], int], now_ms: Callable[[], int]
    ) -> None:
        self._log = plog
        self._epoch = leader_epoch
        self._now_ms = now_ms

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        if not records:
            return
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records], base_timestamp=self._now_ms()
        )
        try:
            self._log.append_as_leader(batch, self._epoch(), now_ms=self._now_ms())
        except Exception as e:
            raise AppendError(getattr(e, "error_code", ErrorCode.unknown_server_error)) from e
        self._log.high_watermark = self._log.log_end_offset

    def replay(self) -> Iterable[tuple[bytes, bytes | None]]:
        offset = self._log.log_start_offset
        end = self._log.log_end_offset
        while offset < end:
            result = self._log.read(offset, READ_CHUNK, upper_bound=end)
            if not result.records:
                break
            for buf in result.records:
                for batch in scan_batches(buf, allow_partial_tail=True):
                    if batch.is_control:
                        offset = batch.last_offset + 1
                        continue
                    for rec in iter_records(batch):
                        if rec.offset >= offset and rec.key is not None:
                            yield rec.key, rec.value
                    offset = batch.last_offset + 1
