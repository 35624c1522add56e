"""Truncation from the end: a follower that diverged from its leader drops its tail
(``truncate_to``), or all of its data (``truncate_fully_and_start_at``).
"""

from __future__ import annotations

from .producer_replay import ProducerReplayMixin


class TruncationMixin(ProducerReplayMixin):
    """Truncation; the producer state is reloaded after it, hence ``ProducerReplayMixin``."""

    def truncate_to(self, offset: int) -> bool:
        """Drop everything at or after ``offset`` (a follower diverged). True if data went."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        if offset >= self._leo:
            self.epoch_cache.truncate_from_end(self._leo)
            return False
        self.drain_writes()
        if self._segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self._clock.now_ms()
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._bases.pop()
        active = self._segments[-1]
        active.truncate_to(offset, now)
        active.resize_indexes(self._config.segment_index_bytes)
        self._leo = max(active.read_next_offset(), active.base_offset)
        self.epoch_cache.truncate_from_end(self._leo)
        self._log_start = min(self._log_start, self._leo)
        self._hw = min(self._hw, self._leo)
        lowered = self._leo < self._recovery_point
        self._recovery_point = min(self._recovery_point, self._leo)
        self._unflushed = 0
        self._generation += 1
        if self._roll_flush_offset is not None and self._roll_flush_offset > self._leo:
            self._roll_flush_offset = None
        psm = self.producer_state
        if psm is not None:
            # Kafka's truncateAndReload: the newest snapshot at or below the new end, then the
            # batches after it. The .txnindex entries below the cut are still right.
            self._reload_producer_state(psm, rebuild_txn_index=False)
        if lowered:
            self._recovery_point_moved_back()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        self.drain_writes()
        lowered = offset < self._recovery_point
        now = self._clock.now_ms()
        for seg in self._segments:
            seg.delete()
        self._segments = [self._make_segment(offset, now)]
        self._bases = [offset]
        self.epoch_cache.clear()
        self._log_start = self._leo = self._hw = self._recovery_point = offset
        self._unflushed = 0
        self._roll_flush_offset = None
        self._txn_index_stale_from = None
        self._generation += 1
        if self.producer_state is not None:
            self.producer_state.truncate_fully_and_start_at(offset)
        if lowered:
            self._recovery_point_moved_back()
