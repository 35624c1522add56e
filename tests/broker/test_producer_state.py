"""Producer state: dedupe, fencing, sequences, transactions, MIRROR_PID_RESET, expiration."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log.clock import ManualClock
from broker.log.producer_state import (
    INT32_MAX,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    TRANSACTION_COORDINATOR_FENCED,
    CompletedTxn,
    DuplicateInfo,
    OngoingTxn,
    ProducerStateError,
    ProducerStateManager,
    decrement_sequence,
    increment_sequence,
)
from protocol.records import (
    BatchView,
    Record,
    build_batch,
    build_end_txn_marker,
    build_mirror_pid_reset,
)

PID = 1000
T0 = 1_700_000_000_000


def data(
    count: int = 1,
    *,
    pid: int = PID,
    epoch: int = 0,
    seq: int = 0,
    offset: int = 0,
    txn: bool = False,
    ts: int = T0,
) -> BatchView:
    records = [Record(value=b"v%d" % i) for i in range(count)]
    return BatchView(
        build_batch(
            records,
            base_offset=offset,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=txn,
            base_timestamp=ts,
        )
    )


def marker(
    commit: bool,
    *,
    pid: int = PID,
    epoch: int = 0,
    offset: int = 0,
    ts: int = T0,
    coordinator_epoch: int = 3,
) -> BatchView:
    return BatchView(
        build_end_txn_marker(
            commit,
            producer_id=pid,
            producer_epoch=epoch,
            coordinator_epoch=coordinator_epoch,
            base_offset=offset,
            timestamp=ts,
        )
    )


class Log:
    """A toy log: assigns offsets, runs check + on_append like PartitionLog will."""

    def __init__(self, psm: ProducerStateManager) -> None:
        self.psm = psm
        self.end = 0
        self.batches: list[BatchView] = []
        self.completed: list[CompletedTxn] = []

    def produce(self, batch: BatchView) -> tuple[int, int] | DuplicateInfo:
        dup = self.psm.check(batch)
        if dup is not None:
            return dup
        return self.write(batch)

    def write(self, batch: BatchView) -> tuple[int, int]:
        buf = bytearray(batch.raw)
        view = BatchView(buf)
        first = self.end
        last = first + view.last_offset_delta
        buf[0:8] = first.to_bytes(8, "big", signed=True)
        done = self.psm.on_append(view, first, last)
        if done is not None:
            self.completed.append(done)
        self.batches.append(view)
        self.end = last + 1
        return first, last


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def psm(tmp_path: Path, clock: ManualClock) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, clock)


@pytest.fixture
def log(psm: ProducerStateManager) -> Log:
    return Log(psm)


def expect_error(code: int, log: Log, batch: BatchView) -> None:
    with pytest.raises(ProducerStateError) as info:
        log.produce(batch)
    assert info.value.error_code == code


# -- idempotence -----------------------------------------------------------------------------
def test_retried_batch_returns_original_offsets(log: Log) -> None:
    assert log.produce(data(3, seq=0, ts=T0 + 1)) == (0, 2)
    assert log.produce(data(2, seq=3, ts=T0 + 2)) == (3, 4)
    end = log.end
    assert log.produce(data(3, seq=0, ts=T0 + 9)) == DuplicateInfo(0, 2, T0 + 1)
    assert log.produce(data(2, seq=3)) == DuplicateInfo(3, 4, T0 + 2)
    assert log.end == end  # nothing written


def test_partial_overlap_is_not_a_duplicate(log: Log) -> None:
    log.produce(data(3, seq=0))
    # Same first sequence, different last: Kafka treats it as out of order, not a duplicate.
    expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER, log, data(2, seq=0))


def test_out_of_order_sequence(log: Log) -> None:
    log.produce(data(2, seq=0))
    expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER, log, data(1, seq=3))  # gap
    expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER, log, data(1, seq=1))  # overlap
    assert log.produce(data(1, seq=2)) == (2, 2)


def test_dedupe_window_is_five_batches(log: Log) -> None:
    for i in range(6):
        log.produce(data(1, seq=i))
    entry = log.psm.last_entry(PID)
    assert entry is not None and len(entry.batches) == 5
    # The first batch fell out of the window: its retry is out of order, as in Kafka.
    expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER, log, data(1, seq=0))
    for i in range(1, 6):
        assert log.produce(data(1, seq=i)) == DuplicateInfo(i, i, T0)


def test_sequence_wraps_at_int32_max(log: Log) -> None:
    assert log.psm.check(data(2, seq=INT32_MAX - 1)) is None  # unknown producer: any sequence
    log.produce(data(2, seq=INT32_MAX - 1))
    entry = log.psm.last_entry(PID)
    assert entry is not None and entry.last_seq == INT32_MAX
    assert log.produce(data(3, seq=0)) == (2, 4)
    # A batch straddling the wrap: INT32_MAX - 1, INT32_MAX, 0.
    log2 = Log(ProducerStateManager(log.psm.partition_dir / "x", ManualClock(T0)))
    log2.produce(data(3, seq=INT32_MAX - 1))
    e2 = log2.psm.last_entry(PID)
    assert e2 is not None and e2.last_seq == 0 and e2.batches[0].first_seq == INT32_MAX - 1
    assert log2.produce(data(3, seq=INT32_MAX - 1)) == DuplicateInfo(0, 2, T0)
    expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER, log2, data(1, seq=2))
    assert log2.produce(data(1, seq=1)) == (3, 3)


@given(st.integers(0, INT32_MAX), st.integers(0, 100_000))
def test_sequence_arithmetic_round_trips(seq: int, delta: int) -> None:
    up = increment_sequence(seq, delta)
    assert 0 <= up <= INT32_MAX
    assert up == (seq + delta) % (INT32_MAX + 1)
    assert decrement_sequence(up, delta) == seq


def test_unknown_producer_accepts_any_sequence(log: Log) -> None:
    # Kafka 4.1: no UNKNOWN_PRODUCER_ID; state may have been lost to retention.
    assert log.produce(data(1, seq=42)) == (0, 0)
    assert log.produce(data(1, seq=43)) == (1, 1)


def test_no_producer_id_is_not_tracked(log: Log) -> None:
    batch = BatchView(build_batch([Record(value=b"a")]))
    assert log.produce(batch) == (0, 0)
    assert log.produce(batch) == (1, 1)
    assert log.psm.producer_count == 0


# -- epochs ----------------------------------------------------------------------------------
def test_older_epoch_is_fenced(log: Log) -> None:
    log.produce(data(1, epoch=5, seq=0))
    expect_error(INVALID_PRODUCER_EPOCH, log, data(1, epoch=4, seq=1))
    expect_error(INVALID_PRODUCER_EPOCH, log, data(1, epoch=4, seq=0))


def test_newer_epoch_must_start_at_zero(log: Log) -> None:
    log.produce(data(1, epoch=1, seq=0))
    log.produce(data(1, epoch=1, seq=1))
    expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER, log, data(1, epoch=2, seq=2))
    assert log.produce(data(1, epoch=2, seq=0)) == (2, 2)
    entry = log.psm.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 2 and len(entry.batches) == 1
    # The old epoch's batches no longer count as duplicates, and that epoch is now fenced.
    expect_error(INVALID_PRODUCER_EPOCH, log, data(1, epoch=1, seq=1))


# -- transactions ----------------------------------------------------------------------------
def test_transactions_hold_the_lso_until_their_markers(log: Log) -> None:
    psm = log.psm
    log.produce(data(2, pid=1, seq=0, txn=True))  # 0-1
    log.produce(data(1, pid=2, seq=0, txn=True))  # 2
    log.produce(data(1, pid=1, seq=2, txn=True))  # 3
    assert psm.first_unstable_offset() == 0
    assert psm.ongoing_transactions() == [OngoingTxn(1, 0), OngoingTxn(2, 2)]
    assert psm.last_stable_offset(4) == 0

    log.write(marker(False, pid=1))  # abort at 4
    assert log.completed == [CompletedTxn(1, 0, 4, is_aborted=True, last_stable_offset=2)]
    assert psm.ongoing_transactions() == [OngoingTxn(2, 2)]
    assert psm.first_undecided_offset() == 2
    # The ended transaction still holds the LSO until the HW passes its marker.
    assert psm.first_unstable_offset() == 0
    assert psm.last_stable_offset(4) == 0
    assert psm.last_stable_offset(5) == 2

    log.write(marker(True, pid=2))  # commit at 5
    assert psm.ongoing_transactions() == []
    assert psm.last_stable_offset(6) == 6
    assert psm.first_unstable_offset() is None


def test_markers_report_completed_transactions(psm: ProducerStateManager) -> None:
    psm.on_append(data(2, pid=1, txn=True), 10, 11)
    psm.on_append(data(1, pid=2, txn=True), 12, 12)
    aborted = psm.on_append(marker(False, pid=1, ts=T0 + 5), 13, 13)
    assert aborted == CompletedTxn(1, 10, 13, is_aborted=True, last_stable_offset=12)
    committed = psm.on_append(marker(True, pid=2), 14, 14)
    assert committed == CompletedTxn(2, 12, 14, is_aborted=False, last_stable_offset=15)
    entry = psm.last_entry(1)
    assert entry is not None
    assert entry.current_txn_first_offset is None
    assert entry.coordinator_epoch == 3
    assert entry.last_timestamp == T0 + 5
    # A marker for a transaction that wrote nothing here reports nothing.
    assert psm.on_append(marker(True, pid=3), 15, 15) is None
    assert psm.last_entry(3) is not None


def test_marker_with_bumped_epoch_resets_sequences(log: Log) -> None:
    log.produce(data(1, seq=0, txn=True))
    log.write(marker(True, epoch=1))
    # Transaction version 2 bumps the epoch in the marker: the next batch starts at 0.
    expect_error(OUT_OF_ORDER_SEQUENCE_NUMBER, log, data(1, epoch=1, seq=1))
    assert log.produce(data(1, epoch=1, seq=0, txn=True)) == (2, 2)


def test_non_transactional_write_inside_a_transaction(log: Log) -> None:
    log.produce(data(1, seq=0, txn=True))
    expect_error(INVALID_TXN_STATE, log, data(1, seq=1, txn=False))
    assert log.produce(data(1, seq=1, txn=True)) == (1, 1)


def test_markers_are_fenced_by_producer_and_coordinator_epoch(log: Log) -> None:
    log.produce(data(1, epoch=2, seq=0, txn=True))
    expect_error(INVALID_PRODUCER_EPOCH, log, marker(True, epoch=1))
    log.produce(marker(True, epoch=2, coordinator_epoch=4))
    log.produce(data(1, epoch=2, seq=1, txn=True))
    expect_error(TRANSACTION_COORDINATOR_FENCED, log, marker(False, epoch=2, coordinator_epoch=3))
    assert log.produce(marker(False, epoch=2, coordinator_epoch=4)) == (3, 3)
    # Unknown producers and non-marker control batches are not checked.
    assert log.psm.check(marker(True, pid=99, epoch=0, coordinator_epoch=0)) is None
    assert log.psm.check(BatchView(build_mirror_pid_reset("src"))) is None


def test_open_transactions_stay_ordered_through_a_snapshot(
    tmp_path: Path, clock: ManualClock
) -> None:
    psm = ProducerStateManager(tmp_path, clock)
    # Producer ids in the opposite order of their transactions' first offsets.
    for offset, pid in enumerate((30, 20, 10)):
        psm.on_append(data(1, pid=pid, txn=True), offset, offset)
    psm.take_snapshot(3)
    again = ProducerStateManager(tmp_path, clock)
    assert again.truncate_and_reload(0, 3) == 3
    assert again.first_unstable_offset() == 0
    assert again.ongoing_transactions() == [OngoingTxn(30, 0), OngoingTxn(20, 1), OngoingTxn(10, 2)]
    done = again.on_append(marker(False, pid=30), 3, 3)
    assert done == CompletedTxn(30, 0, 3, is_aborted=True, last_stable_offset=1)
    assert again.first_undecided_offset() == 1


# -- MIRROR_PID_RESET ------------------------------------------------------------------------
def test_mirror_pid_reset_wipes_every_producer(log: Log) -> None:
    psm = log.psm
    log.produce(data(1, pid=1, epoch=7, seq=0))
    log.produce(data(1, pid=2, seq=0, txn=True))
    assert psm.producer_count == 2
    log.write(BatchView(build_mirror_pid_reset("source-cluster")))
    assert psm.producer_count == 0
    assert psm.ongoing_transactions() == []
    assert psm.first_unstable_offset() is None
    # Epoch 0 of producer 1 would have been fenced; now it is an unknown producer again.
    assert log.produce(data(1, pid=1, epoch=0, seq=5)) == (3, 3)


def test_mirror_pid_reset_during_replay(tmp_path: Path, clock: ManualClock) -> None:
    batches = [
        data(1, pid=1, seq=0, offset=0),
        data(1, pid=2, seq=0, offset=1),
        BatchView(build_mirror_pid_reset("src", base_offset=2)),
        data(1, pid=3, seq=0, offset=3),
    ]
    psm = ProducerStateManager(tmp_path, clock)
    for b in batches:
        psm.replay_batch(b)
    assert sorted(psm.active_producers) == [3]
    assert psm.map_end_offset == 4


def test_kraft_control_batches_are_ignored(psm: ProducerStateManager) -> None:
    psm.on_append(data(1), 0, 0)
    leader_change = BatchView(
        build_batch([Record(key=b"\x00\x00\x00\x02", value=b"\x00\x00")], is_control=True)
    )
    assert psm.on_append(leader_change, 1, 1) is None
    assert psm.producer_count == 1


# -- expiration ------------------------------------------------------------------------------
def test_idle_producers_expire(tmp_path: Path, clock: ManualClock) -> None:
    psm = ProducerStateManager(tmp_path, clock, max_producer_id_expiration_ms=1000)
    psm.on_append(data(1, pid=1, ts=T0), 0, 0)
    psm.on_append(data(1, pid=2, ts=T0 + 500), 1, 1)
    psm.on_append(data(1, pid=3, ts=T0, txn=True), 2, 2)
    clock.advance(999)
    assert psm.remove_expired() == 0
    clock.advance(1)
    assert psm.remove_expired() == 1
    assert sorted(psm.active_producers) == [2, 3]
    # An open transaction keeps its producer however idle it is.
    assert psm.remove_expired(T0 + 10_000) == 1
    assert sorted(psm.active_producers) == [3]


def test_log_append_time_is_recorded(psm: ProducerStateManager) -> None:
    psm.on_append(data(2, ts=T0), 0, 1, append_time_ms=T0 + 777)
    entry = psm.last_entry(PID)
    assert entry is not None and entry.last_timestamp == T0 + 777
    dup = psm.check(data(2, ts=T0))
    assert dup == DuplicateInfo(0, 1, T0 + 777) and dup.log_append_time_ms == T0 + 777
    # last_offset defaults from the batch's offset delta.
    psm.on_append(data(3, seq=2), 2)
    assert psm.map_end_offset == 5
    assert psm.check(data(3, seq=2)) == DuplicateInfo(2, 4, T0)
