"""Rolling the active segment and making the log durable: the inline ``flush`` and the
three-step background flush (see ``background_flush``) that moves the recovery point.
"""

from __future__ import annotations

from ..background_flush import FlushPlan
from ..segment import LogSegment
from .state import PartitionLogState


class FlushMixin(PartitionLogState):
    """Rolls and flushes; the recovery point moves only here."""

    def roll(
        self, expected_next_offset: int | None = None, *, now_ms: int | None = None
    ) -> LogSegment:
        """Start a new active segment at max(expected, log end offset)."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        new_base = max(expected_next_offset or 0, self._leo)
        active = self._segments[-1]
        if active.base_offset == new_base and active.size == 0:
            return active
        if active.size == 0:
            # An empty active segment at another offset is simply replaced.
            active.delete()
            self._segments.pop()
            self._bases.pop()
        else:
            active.on_become_inactive()  # drains its writes first (see there)
            self._roll_flush_offset = new_base
            self._want_background()
        seg = self._make_segment(new_base, now)
        self._segments.append(seg)
        self._bases.append(new_base)
        psm = self.producer_state
        if psm is not None:
            # As Kafka: a snapshot per segment bounds what a truncation or a recovery replays.
            # Not fsynced here; a torn one fails its CRC and an older one is used.
            psm.take_snapshot(new_base, sync=False)
        return seg

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default: the log end) and move the recovery point."""
        offset = self._leo if up_to is None else min(up_to, self._leo)
        if offset <= self._recovery_point:
            return
        self.drain_writes()
        for i, seg in enumerate(self._segments):
            seg_end = self._bases[i + 1] if i + 1 < len(self._bases) else None
            if seg_end is not None and seg_end <= self._recovery_point:
                continue  # already durable
            if seg.base_offset >= offset:
                break
            seg.flush()
        self._recovery_point = max(self._recovery_point, offset)
        self.epoch_cache.hold_recovery_point(self._recovery_point)
        self.epoch_cache.flush()
        self._last_flush_ms = self._clock.now_ms()
        if offset >= self._leo:
            self._unflushed = 0
        if self._roll_flush_offset is not None and self._roll_flush_offset <= offset:
            self._roll_flush_offset = None

    # -- background flushes (see background_flush) ----------------------------------------
    def plan_due_flush(self, now_ms: int) -> FlushPlan | None:
        """The periodic flush, planned for a worker thread: a rolled segment, or everything
        once flush.ms has passed."""
        if self._unflushed and now_ms - self._last_flush_ms >= self._config.flush_ms:
            return self.plan_flush()
        if self._roll_flush_offset is not None:
            return self.plan_flush(self._roll_flush_offset)
        return None

    def plan_flush(self, up_to: int | None = None, *, snapshot: bool = False) -> FlushPlan | None:
        """Step 1 of a background flush to ``up_to`` (default: the log end); with ``snapshot``
        the producer state there too (the recovery checkpoint). None: nothing to do, or a
        background flush of this log is still running."""
        if self._closed or self._flush_in_flight:
            return None
        end = self._leo if up_to is None else min(up_to, self._leo)
        plan = FlushPlan(self.name, end, self._generation)
        if end > self._recovery_point:
            for i, seg in enumerate(self._segments):
                seg_end = self._bases[i + 1] if i + 1 < len(self._bases) else None
                if seg_end is not None and seg_end <= self._recovery_point:
                    continue  # already durable
                if seg.base_offset >= end:
                    break
                plan.paths.extend(seg.sync_paths())
        psm = self.producer_state
        if snapshot and psm is not None and end == self._leo > self._log_start:
            latest = psm.latest_snapshot_offset()
            if latest is None or latest < end:
                plan.snapshot = psm.encode_state()
                plan.snapshot_tmp = psm.snapshot_tmp_path(end)
        if end <= self._recovery_point and plan.snapshot is None:
            return None
        epochs = self.epoch_cache.plan_write()
        if epochs is not None:
            plan.epochs, plan.epochs_tmp = epochs
        if self._last_job is not None:
            # The flush thread first waits until the writer has put ``end`` in the file.
            plan.barrier = self._writer.barrier()
        self._flush_in_flight = True
        return plan

    def complete_flush(self, plan: FlushPlan) -> None:
        """Step 3, on the loop once the thread is done: the recovery point moves and the
        snapshot goes into place, unless the log was truncated or closed meanwhile."""
        self._flush_in_flight = False
        if not plan.ok or self._closed or plan.generation != self._generation:
            plan.discard()
            return
        if plan.epochs is not None and plan.epochs_tmp is not None:
            self.epoch_cache.install(plan.epochs, plan.epochs_tmp)
        if plan.up_to > self._recovery_point:
            self._recovery_point = plan.up_to
            self.epoch_cache.hold_recovery_point(plan.up_to)
            self._last_flush_ms = self._clock.now_ms()
            if plan.up_to >= self._leo:
                self._unflushed = 0
        if self._roll_flush_offset is not None and self._roll_flush_offset <= plan.up_to:
            self._roll_flush_offset = None
        psm = self.producer_state
        if plan.snapshot_tmp is not None:
            if psm is None:
                plan.discard()
            else:
                psm.install_snapshot(plan.snapshot_tmp, plan.up_to)

    def checkpoint_recovery(self) -> None:
        """The recovery checkpoint done in place (tools, tests): the background flush's three
        steps in a row: fsync to the log end, then the producer snapshot there."""
        plan = self.plan_flush(snapshot=True)
        if plan is not None:
            plan.run()
            self.complete_flush(plan)
