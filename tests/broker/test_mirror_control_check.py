"""Which control batches the mirror fetcher refuses (the partition then FAILS)."""

from __future__ import annotations

import pytest

from broker.log.compaction import empty_batch_like
from broker.mirror.core.control_check import control_batch_problem
from protocol.records import (
    BatchView,
    ControlType,
    Record,
    build_batch,
    build_end_txn_marker,
    build_mirror_pid_reset,
    control_key,
)
from protocol.records.batch import HEADER_SIZE


def _control(key: bytes | None, value: bytes | None = None, *, txn: bool = True) -> BatchView:
    return BatchView(
        build_batch(
            [Record(key=key, value=value)],
            base_offset=12,
            producer_id=5 if txn else -1,
            producer_epoch=0 if txn else -1,
            is_transactional=txn,
            is_control=True,
        )
    )


@pytest.mark.parametrize(
    "batch",
    [
        _control(control_key(ControlType.COMMIT)),  # null value: type from the key
        _control(control_key(ControlType.ABORT), b"\x00"),  # short value
        BatchView(build_end_txn_marker(True, producer_id=5, producer_epoch=0, coordinator_epoch=1)),
        BatchView(build_mirror_pid_reset("src")),
        _control(control_key(ControlType.LEADER_CHANGE), b"", txn=False),
        BatchView(empty_batch_like(_control(control_key(99)))),  # emptied: nothing to read
    ],
)
def test_readable_control_batches_are_stored(batch: BatchView) -> None:
    assert control_batch_problem(batch) is None


def _corrupt_records() -> BatchView:
    raw = bytearray(build_batch([Record(key=control_key(1), value=None)], is_control=True))
    raw[HEADER_SIZE] = 0x7F  # the record's length varint now overruns the batch
    return BatchView(bytes(raw))


@pytest.mark.parametrize(
    ("batch", "reason"),
    [
        (_control(None), "unreadable control batch at offset 12: control record key must"),
        (_control(b"\x00\x00\x01"), "unreadable control batch at offset 12"),
        (_control(control_key(99)), "control batch at offset 12 has unknown type 99"),
        (_control(control_key(ControlType.MIRROR_PID_RESET), None), "null value"),
        (_corrupt_records(), "unreadable control batch at offset 0"),
    ],
)
def test_unreadable_control_batches_are_refused(batch: BatchView, reason: str) -> None:
    problem = control_batch_problem(batch)
    assert problem is not None and reason in problem, problem
