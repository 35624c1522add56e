"""Segments leaving the log from its start: DeleteRecords and retention (by size, age or the
log start) move the log start up; deleted and replaced (compacted) segments' files are
renamed ``.deleted`` and purged once file.delete.delay.ms has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..checkpoint import fsync_dir
from ..errors import OffsetOutOfRange
from ..segment import LogSegment
from ..segment_swap import CLEANED_SUFFIX, SWAP_SUFFIX, remove_staged, rename_suffix
from .flush import FlushMixin
from .state import PendingDelete, log


class RetentionMixin(FlushMixin):
    """The log start moving up and segments leaving; deleting every segment rolls a new one."""

    # -- log start -----------------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start up to ``offset`` (-1 = the HW); new log start."""
        if offset == -1:
            offset = self._hw
        if offset < 0 or offset > self._hw:
            raise OffsetOutOfRange(self._log_start, self._hw, offset)
        self._increment_log_start(offset)
        self._delete_while(self._before_log_start, self._clock.now_ms())
        return self._log_start

    def _increment_log_start(self, offset: int) -> None:
        if offset > self._hw:
            raise OffsetOutOfRange(self._log_start, self._hw, offset)
        if offset > self._log_start:
            self._log_start = offset
            self._want_background()  # the log start checkpoint is due
            self.epoch_cache.truncate_from_start(offset)
            if self.producer_state is not None:
                self.producer_state.on_log_start_offset_incremented(offset)
            log.info("%s: log start offset is now %d", self.name, offset)

    # -- retention -----------------------------------------------------------------------
    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: segments below the log start, then by size and age (cleanup.policy=delete).

        Never deletes data at or above the high watermark, nor the active segment's data
        (an all-deleted log rolls a fresh empty segment first, as Kafka does).
        """
        deleted = self._delete_while(self._before_log_start, now_ms)
        cfg = self._config
        if cfg.delete_enabled:
            if cfg.retention_bytes >= 0 and self.size_bytes >= cfg.retention_bytes:
                excess = [self.size_bytes - cfg.retention_bytes]

                def over_size(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_while(over_size, now_ms)
            if cfg.retention_ms >= 0:

                def too_old(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    return now_ms - seg.largest_timestamp > cfg.retention_ms

                deleted += self._delete_while(too_old, now_ms)
        self.purge_deleted_files(now_ms)
        return deleted

    def _before_log_start(self, _seg: LogSegment, nxt: LogSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= self._log_start

    def _delete_while(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], now_ms: int
    ) -> int:
        deletable: list[LogSegment] = []
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if self._hw >= upper and predicate(seg, nxt):
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        count = len(deletable)
        if count == len(self._segments):
            new_seg = self.roll(now_ms=now_ms)
            if deletable[-1] is new_seg:
                deletable.pop()
        if deletable:
            idx = self._segments.index(deletable[-1])
            self._increment_log_start(self._segments[idx + 1].base_offset)
            pending = PendingDelete(now_ms + self._config.file_delete_delay_ms)
            for seg in deletable:
                pending.paths.extend(seg.mark_deleted())
            del self._segments[: len(deletable)]
            del self._bases[: len(deletable)]
            self._pending_deletes.append(pending)
            self._want_background()
            log.info(
                "%s: deleted %d segment(s); log start offset %d",
                self.name,
                len(deletable),
                self._log_start,
            )
        return count

    def purge_deleted_files(self, now_ms: int, *, force: bool = False) -> None:
        """Remove ``*.deleted`` files whose file.delete.delay.ms has passed."""
        keep = []
        for pending in self._pending_deletes:
            if force or pending.due_ms <= now_ms:
                for path in pending.paths:
                    path.unlink(missing_ok=True)
            else:
                keep.append(pending)
        self._pending_deletes = keep

    # -- compaction ----------------------------------------------------------------------
    def replace_segments(self, old: Sequence[LogSegment], sizes: Sequence[int]) -> bool:
        """Swap the cleaner's ``<base>.*.cleaned`` files in for ``old`` (adjacent closed
        segments, the first one's base offset naming the new segment); see ``segment_swap``.

        Runs on the loop in one go, so readers never see a half-swapped log. Returns False,
        and removes the staged files, when the log changed since the cleaner read ``old``
        (a segment deleted, truncated or become active, or the log closed).
        """
        base = old[0].base_offset if old else -1
        i = next((k for k, seg in enumerate(self._segments) if seg is old[0]), -1) if old else -1
        n = len(old)
        if (
            self._closed
            or i < 0
            or i + n >= len(self._segments)
            or any(a is not b for a, b in zip(self._segments[i : i + n], old, strict=True))
            or any(seg.size != size for seg, size in zip(old, sizes, strict=True))
        ):
            remove_staged(self.dir, base, CLEANED_SUFFIX)
            return False
        now = self._clock.now_ms()
        rename_suffix(self.dir, base, CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.dir)
        pending = PendingDelete(now + self._config.file_delete_delay_ms)
        for seg in old:
            pending.paths.extend(seg.mark_deleted())
        rename_suffix(self.dir, base, SWAP_SUFFIX, "")
        fsync_dir(self.dir)
        self._segments[i : i + n] = [self._make_segment(base, now)]
        self._bases[i : i + n] = [base]
        self._pending_deletes.append(pending)
        self._want_background()
        return True
