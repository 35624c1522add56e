"""The controller's written state: what it decides on (Kafka's QuorumController checks every
request against the latest state of its snapshot registry, committed or not).

That is the committed image plus every batch this controller appended in its current leader
epoch that the committed image does not hold yet. A batch is applied here the moment it goes
into the log, before its commit: a request validated after it sees it even when the caller of
the first one stopped waiting (its client's connection closed and cancelled the request task,
which released the controller lock with the batch still uncommitted; issue 27: two TopicRecords
for one name). When the leader epoch the batches were written in ends, they are dropped: what
the next leader kept of them reaches the committed image through the log, and a new epoch's
writes start again from the committed image (the controller lock waits until that holds every
record before the new epoch's LeaderChange).

Brokers never see this state: their image is the committed one.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..metadata.image import MetadataImage, apply_records

log = logging.getLogger(__name__)

# Applies (offset, record) pairs to an image (the node's applies secrets at rest as it does).
ApplyBatch = Callable[[MetadataImage, list[tuple[int, Any]]], MetadataImage]


def _apply(img: MetadataImage, pairs: list[tuple[int, Any]]) -> MetadataImage:
    return apply_records(img, pairs)[0]


class WrittenState:
    def __init__(
        self,
        committed: Callable[[], MetadataImage],
        leader_epoch: Callable[[], int | None],
        apply: ApplyBatch = _apply,
    ) -> None:
        """``committed()``: the image of committed records; ``leader_epoch()``: the epoch this
        node leads the quorum in, None when it does not lead."""
        self._committed = committed
        self._leader_epoch = leader_epoch
        self._apply = apply
        self._epoch: int | None = None  # of the pending batches
        self._pending: deque[int] = deque()  # last offset of each uncommitted batch, ascending
        self._written: MetadataImage | None = None  # committed + pending, while any is pending
        self.rollbacks = 0  # epochs that ended with batches uncommitted (a metric)

    @property
    def pending(self) -> int:
        """Batches written but not yet in the committed image."""
        return len(self._pending)

    def image(self) -> MetadataImage:
        """The state to validate against."""
        committed = self._committed()
        if self._pending and self._leader_epoch() != self._epoch:
            self.rollback()
        while self._pending and self._pending[0] <= committed.offset:
            self._pending.popleft()
        if not self._pending:
            self._written = None
            return committed
        assert self._written is not None
        return self._written

    def appended(self, epoch: int, last_offset: int, records: Sequence[Any]) -> None:
        """``records`` went into the log at offsets ending at ``last_offset`` in ``epoch``."""
        if not records:
            return
        if last_offset <= self._committed().offset:
            # committed and applied within the append (a quorum of one voter): nothing pending
            return
        base = self.image()
        if self._pending and epoch != self._epoch:
            self.rollback()
            base = self._committed()
        if not self._pending and last_offset <= base.offset:
            # already committed and applied within the append (a quorum of one voter commits
            # as it appends): the committed image holds it, nothing is pending
            return
        first = last_offset - len(records) + 1
        if first <= base.offset:
            raise AssertionError(
                f"batch at offsets {first}-{last_offset} is not after the written state "
                f"(offset {base.offset})"
            )
        self._written = self._apply(base, [(first + i, r) for i, r in enumerate(records)])
        self._epoch = epoch
        self._pending.append(last_offset)

    def rollback(self) -> None:
        """Back to the committed image: the epoch the pending batches were written in ended."""
        if self._pending:
            self.rollbacks += 1
            log.info(
                "controller: leader epoch %s ended with %d written batch(es) uncommitted "
                "(up to offset %d); deciding on the committed image again",
                self._epoch,
                len(self._pending),
                self._pending[-1],
            )
        self._pending.clear()
        self._written = None
        self._epoch = None
