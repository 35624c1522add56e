"""The transaction state machine (TxnMetadata): transitions, epochs, fencing, and records."""

import struct

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.record_framing import RecordFormatError
from broker.coordinator.txn import records as rec
from broker.coordinator.txn.metadata import (
    MAX_EPOCH,
    VALID_PREVIOUS,
    TransitionError,
    TxnMetadata,
    TxnState,
    TxnTransit,
)

S = TxnState
NOW = 1_700_000_000_000
TP = frozenset({("t", 0), ("t", 1)})


def fresh(pid: int = 7, epoch: int = -1, state: TxnState = S.EMPTY) -> TxnMetadata:
    return TxnMetadata("tx", producer_id=pid, producer_epoch=epoch, state=state, update_ms=NOW)


def apply(meta: TxnMetadata, transit: TxnTransit) -> TxnMetadata:
    meta.complete(transit)
    return meta


def ongoing(epoch: int = 0) -> TxnMetadata:
    meta = fresh(epoch=epoch)
    return apply(meta, meta.prepare_add_partitions(TP, NOW + 1))


def test_new_producer_gets_epoch_zero() -> None:
    meta = fresh()
    t = meta.prepare_increment_epoch(60_000, None, NOW)
    assert isinstance(t, TxnTransit)
    assert (t.state, t.producer_epoch, t.last_producer_epoch) == (S.EMPTY, 0, -1)
    apply(meta, t)
    assert (meta.state, meta.producer_epoch, meta.pending) == (S.EMPTY, 0, None)


def test_full_commit_cycle() -> None:
    meta = ongoing()
    assert meta.state == S.ONGOING and meta.partitions == set(TP) and meta.start_ms == NOW + 1
    # adding more keeps the start time
    apply(meta, meta.prepare_add_partitions(frozenset({("u", 0)}), NOW + 2))
    assert meta.start_ms == NOW + 1 and ("u", 0) in meta.partitions
    apply(meta, meta.prepare_end(True, NOW + 3))
    assert meta.state == S.PREPARE_COMMIT and meta.partitions == set(TP) | {("u", 0)}
    apply(meta, meta.prepare_complete(NOW + 4))
    assert (meta.state, meta.partitions, meta.producer_epoch) == (S.COMPLETE_COMMIT, set(), 0)
    # the next transaction starts anew
    apply(meta, meta.prepare_add_partitions(TP, NOW + 5))
    assert meta.state == S.ONGOING and meta.start_ms == NOW + 5


def test_abort_completes_as_complete_abort() -> None:
    meta = ongoing()
    apply(meta, meta.prepare_end(False, NOW + 3))
    assert meta.state == S.PREPARE_ABORT
    apply(meta, meta.prepare_complete(NOW + 4))
    assert meta.state == S.COMPLETE_ABORT


def test_fence_bumps_the_epoch_and_aborts() -> None:
    meta = ongoing(epoch=4)
    t = meta.prepare_fence(NOW + 2)
    assert (t.state, t.producer_epoch, t.fence) == (S.PREPARE_ABORT, 5, True)
    apply(meta, t)
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (S.PREPARE_ABORT, 5, -1)
    apply(meta, meta.prepare_complete(NOW + 3))
    assert (meta.state, meta.producer_epoch) == (S.COMPLETE_ABORT, 5)


def test_a_failed_write_changes_nothing() -> None:
    meta = ongoing(epoch=4)
    meta.prepare_fence(NOW + 2)
    meta.abandon()
    assert (meta.state, meta.producer_epoch, meta.pending) == (S.ONGOING, 4, None)
    # and the next fence bumps from the same epoch again
    assert meta.prepare_fence(NOW + 3).producer_epoch == 5


def test_only_one_pending_transition() -> None:
    meta = ongoing()
    meta.prepare_end(True, NOW + 2)
    with pytest.raises(TransitionError):
        meta.prepare_end(False, NOW + 2)


@pytest.mark.parametrize(
    ("state", "prepare"),
    [
        (S.EMPTY, lambda m: m.prepare_end(True, NOW)),
        (S.COMPLETE_COMMIT, lambda m: m.prepare_end(True, NOW)),
        (S.PREPARE_COMMIT, lambda m: m.prepare_add_partitions(TP, NOW)),
        (S.PREPARE_ABORT, lambda m: m.prepare_increment_epoch(1000, None, NOW)),
        (S.ONGOING, lambda m: m.prepare_complete(NOW)),
        (S.EMPTY, lambda m: m.prepare_fence(NOW)),
        (S.ONGOING, lambda m: m.prepare_rotation(9, 1000, NOW, False)),
    ],
)
def test_forbidden_transitions_raise(state: TxnState, prepare: object) -> None:
    meta = fresh(epoch=0, state=state)
    with pytest.raises(TransitionError):
        prepare(meta)  # type: ignore[operator]
    assert meta.pending is None


def test_valid_previous_states_match_kafka() -> None:
    assert VALID_PREVIOUS[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS[S.EMPTY] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert VALID_PREVIOUS[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.PREPARE_COMMIT.label == "PrepareCommit"
    assert S.from_label("CompleteAbort") == S.COMPLETE_ABORT and S.from_label("x") is None


# -- KIP-360: a client naming its current producer id/epoch ------------------------------------


def test_expected_current_epoch_bumps_and_remembers_the_last() -> None:
    meta = fresh(epoch=3)
    t = meta.prepare_increment_epoch(1000, 3, NOW)
    assert isinstance(t, TxnTransit)
    assert (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    apply(meta, t)
    # a retry of that same call (the client never saw the answer) gets the same epoch again
    retry = meta.prepare_increment_epoch(1000, 3, NOW + 1)
    assert isinstance(retry, TxnTransit)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)


def test_expected_stale_epoch_is_fenced() -> None:
    meta = fresh(epoch=5)
    assert meta.prepare_increment_epoch(1000, 2, NOW) == ErrorCode.producer_fenced
    assert meta.pending is None


def test_expected_producer_id_checks() -> None:
    meta = fresh(pid=7, epoch=3)
    assert meta.valid_expected_producer(7, 3)
    assert not meta.valid_expected_producer(8, 3)
    meta.prev_producer_id = 6
    assert meta.valid_expected_producer(6, MAX_EPOCH - 1)  # a retry after a rotation
    assert not meta.valid_expected_producer(6, 3)
    assert fresh(pid=7, epoch=-1).valid_expected_producer(99, 0)  # just created


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    meta = fresh(pid=7, epoch=MAX_EPOCH - 1)
    assert meta.epoch_exhausted
    with pytest.raises(TransitionError):
        meta.prepare_increment_epoch(1000, None, NOW)
    t = meta.prepare_rotation(8, 1000, NOW, record_last_epoch=True)
    apply(meta, t)
    assert (meta.producer_id, meta.producer_epoch, meta.prev_producer_id) == (8, 0, 7)
    assert meta.last_producer_epoch == MAX_EPOCH - 1


# -- records -------------------------------------------------------------------------------------


def test_value_layout_is_kafkas_version_0() -> None:
    """TransactionLogValue v0, written out field by field from Kafka's schema."""
    t = TxnTransit(5, -1, 3, -1, 60_000, S.ONGOING, frozenset({("b", 2), ("a", 1)}), 11, 22)
    want = b"".join(
        [
            struct.pack(">hqhib", 0, 5, 3, 60_000, 1),  # version, pid, epoch, timeout, status
            struct.pack(">i", 2),  # two topics
            struct.pack(">h", 1) + b"a" + struct.pack(">ii", 1, 1),
            struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2),
            struct.pack(">qq", 22, 11),  # last update, start
        ]
    )
    assert rec.txn_value(t) == want
    assert rec.txn_key("tx") == struct.pack(">hh", 0, 2) + b"tx"


def test_records_round_trip() -> None:
    for t in [
        TxnTransit(5, -1, 0, -1, 1, S.EMPTY, frozenset(), -1, NOW),
        TxnTransit(5, -1, 9, -1, 900_000, S.PREPARE_COMMIT, TP, NOW - 5, NOW),
        TxnTransit(2**40, -1, MAX_EPOCH, -1, 10, S.COMPLETE_ABORT, frozenset(), NOW, NOW),
    ]:
        assert rec.decode_value(rec.txn_value(t)) == t
    assert rec.decode_key(rec.txn_key("émoji-✓")) == "émoji-✓"


def test_empty_state_has_null_partitions() -> None:
    value = rec.txn_value(TxnTransit(5, -1, 0, -1, 1, S.EMPTY, frozenset(), -1, NOW))
    assert value[2 + 8 + 2 + 4 + 1 :][:4] == struct.pack(">i", -1)
    with pytest.raises(ValueError, match="Empty"):
        rec.txn_value(TxnTransit(5, -1, 0, -1, 1, S.EMPTY, TP, -1, NOW))


def test_bad_records_fail_clearly() -> None:
    good = rec.txn_value(TxnTransit(5, -1, 0, -1, 1, S.ONGOING, TP, NOW, NOW))
    with pytest.raises(RecordFormatError, match="version 9"):
        rec.decode_value(b"\x00\x09" + good[2:])
    with pytest.raises(RecordFormatError):
        rec.decode_value(good[:-3])
    bad_state = bytearray(good)
    bad_state[2 + 8 + 2 + 4] = 42
    with pytest.raises(RecordFormatError, match="state 42"):
        rec.decode_value(bytes(bad_state))
    assert rec.decode_key(b"\x00\x01\x00\x02tx") is None  # another key version: skipped
