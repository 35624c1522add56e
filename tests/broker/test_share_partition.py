"""The KIP-932 share-partition state machine (sans-IO): acquiring whole batches, acknowledging,
releasing, lock expiry, the delivery count limit and the SPSO moving up; share sessions."""

from kio.schema.errors import ErrorCode

from broker.coordinator.share.partition import (
    AckType,
    Acquired,
    RecordState,
    ShareConfig,
    SharePartition,
)
from broker.coordinator.share.sessions import FINAL_EPOCH, ShareSession, ShareSessions

ACCEPT, RELEASE, REJECT, GAP = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP
CFG = ShareConfig(lock_duration_ms=1_000, delivery_count_limit=3, max_record_locks=100)


def _sp(start: int = 0) -> SharePartition:
    return SharePartition(start, CFG)


def test_acquire_new_batches_then_nothing_left() -> None:
    sp = _sp()
    assert sp.acquire("m1", 0, 9, now_ms=0) == [Acquired(0, 9, 1)]
    assert sp.next_offset == 10 and sp.start_offset == 0
    # a second member asking for the same offsets gets nothing: they are held
    assert sp.acquire("m2", 0, 9, now_ms=0) == []
    assert sp.state_of(5) == (RecordState.ACQUIRED, 1, "m1")


def test_accept_moves_the_start_offset() -> None:
    sp = _sp()
    sp.acquire("m1", 0, 4, 0)
    sp.acquire("m2", 5, 9, 0)
    assert sp.acknowledge("m2", 5, 9, [ACCEPT]) == ErrorCode.none
    assert sp.start_offset == 0  # 0-4 still in flight
    assert sp.acknowledge("m1", 0, 4, [ACCEPT]) == ErrorCode.none
    assert sp.start_offset == 10 and sp.ranges == []


def test_release_redelivers_with_a_higher_count() -> None:
    sp = _sp()
    sp.acquire("m1", 0, 9, 0)
    # per-offset types: 0-2 accepted, 3 released, 4-9 accepted
    types = [ACCEPT] * 3 + [RELEASE] + [ACCEPT] * 6
    assert sp.acknowledge("m1", 0, 9, [int(t) for t in types]) == ErrorCode.none
    assert sp.start_offset == 3
    assert sp.available() == [(3, 3)]
    assert sp.acquire("m2", 0, 9, 10) == [Acquired(3, 3, 2)]
    assert sp.acknowledge("m2", 3, 3, [ACCEPT]) == ErrorCode.none
    assert sp.start_offset == 10


def test_lock_expiry_releases_and_the_limit_archives() -> None:
    sp = _sp()
    sp.acquire("m1", 0, 0, now_ms=0)
    assert sp.next_deadline() == 1_000
    assert not sp.expire_locks(999)
    assert sp.expire_locks(1_000)  # back to AVAILABLE
    assert sp.acquire("m2", 0, 0, 1_000) == [Acquired(0, 0, 2)]
    # the holder lost the lock: its late acknowledgement is refused
    assert sp.acknowledge("m1", 0, 0, [ACCEPT]) == ErrorCode.invalid_record_state
    sp.expire_locks(2_000)
    assert sp.acquire("m2", 0, 0, 2_000) == [Acquired(0, 0, 3)]
    # third delivery (the limit) released again: archived, never delivered again
    assert sp.acknowledge("m2", 0, 0, [RELEASE]) == ErrorCode.none
    assert sp.available() == [] and sp.start_offset == 1


def test_reject_and_gap_archive() -> None:
    sp = _sp()
    sp.acquire("m1", 0, 3, 0)
    assert sp.acknowledge("m1", 0, 1, [REJECT]) == ErrorCode.none
    assert sp.acknowledge("m1", 2, 3, [int(GAP), int(ACCEPT)]) == ErrorCode.none
    assert sp.start_offset == 4 and sp.acquire("m1", 0, 3, 0) == []


def test_acknowledging_what_another_member_holds_is_refused() -> None:
    sp = _sp()
    sp.acquire("m1", 0, 4, 0)
    assert sp.acknowledge("m2", 0, 4, [ACCEPT]) == ErrorCode.invalid_record_state
    assert sp.acknowledge("m1", 3, 7, [ACCEPT]) == ErrorCode.invalid_record_state  # 5-7 unknown
    assert sp.acknowledge("m1", 20, 21, [ACCEPT]) == ErrorCode.invalid_record_state
    assert sp.acknowledge("m1", 0, 4, [ACCEPT, ACCEPT]) == ErrorCode.invalid_request  # 2 != 5
    assert sp.acknowledge("m1", 0, 4, [9]) == ErrorCode.invalid_request
    assert sp.acknowledge("m1", 4, 3, [ACCEPT]) == ErrorCode.invalid_request
    assert sp.state_of(0) == (RecordState.ACQUIRED, 1, "m1")  # nothing changed


def test_release_member_and_lock_limit() -> None:
    sp = SharePartition(0, ShareConfig(max_record_locks=10))
    sp.acquire("m1", 0, 9, 0)
    assert not sp.can_acquire_new()  # 10 offsets in flight: the lock limit
    assert sp.release_member("m1") == 1
    assert sp.available() == [(0, 9)]
    assert sp.acquire("m2", 0, 9, 0) == [Acquired(0, 9, 2)]


def test_log_start_moving_past_the_start_drops_ranges() -> None:
    sp = _sp(5)
    sp.acquire("m1", 5, 14, 0)
    sp.move_start(10)
    assert sp.start_offset == 10 and sp.state_of(7) is None
    assert sp.state_of(12) == (RecordState.ACQUIRED, 1, "m1")
    sp.move_start(30)
    assert sp.start_offset == 30 and sp.next_offset == 30


def test_acquire_redelivery_and_new_in_one_run() -> None:
    sp = _sp()
    sp.acquire("m1", 0, 4, 0)
    sp.acknowledge("m1", 0, 4, [ACCEPT, RELEASE, ACCEPT, ACCEPT, ACCEPT])
    # a run over 0..9: offset 1 again (count 2), 5-9 new (count 1)
    assert sp.acquire("m2", 0, 9, 0) == [Acquired(1, 1, 2), Acquired(5, 9, 1)]


def test_sessions_epochs() -> None:
    sessions = ShareSessions(max_sessions=2, evict_idle_ms=100)
    s = sessions.open("g", "m1", 0)
    assert isinstance(s, ShareSession) and s.epoch == 1
    assert sessions.use("g", "m1", 2, 0) == ErrorCode.invalid_share_session_epoch
    assert isinstance(sessions.use("g", "m1", 1, 0), ShareSession)
    assert sessions.use("g", "m1", 1, 0) == ErrorCode.invalid_share_session_epoch  # stale
    assert sessions.use("g", "m2", 1, 0) == ErrorCode.share_session_not_found
    assert isinstance(sessions.use("g", "m1", FINAL_EPOCH, 0), ShareSession)
    assert sessions.close("g", "m1") is not None
    assert sessions.use("g", "m1", 2, 0) == ErrorCode.share_session_not_found
    sessions.open("g", "a", 0)
    sessions.open("g", "b", 50)
    assert sessions.open("g", "c", 60) == ErrorCode.share_session_limit_reached
    assert isinstance(sessions.open("g", "c", 120), ShareSession)  # "a" idle too long: evicted


def test_persisted_state_restores_without_locks() -> None:
    sp = _sp(0)
    sp.acquire("m1", 0, 9, 0)
    sp.acknowledge("m1", 0, 2, [ACCEPT])  # start moves to 3
    sp.acknowledge("m1", 5, 5, [REJECT])
    sp.acknowledge("m1", 6, 6, [RELEASE])
    saved = sp.persisted()
    assert sp.start_offset == 3
    assert saved == [(3, 4, 0, 1), (5, 5, 4, 1), (6, 9, 0, 1)]  # acquired ones as available
    back = SharePartition.restore(3, saved, CFG)
    assert (back.start_offset, back.next_offset) == (3, 10)
    assert back.available() == [(3, 4), (6, 9)]
    assert back.acquire("m2", 3, 9, 0) == [Acquired(3, 4, 2), Acquired(6, 9, 2)]
    # an empty state restores at its start; runs below the start are dropped
    assert SharePartition.restore(7, [(0, 6, 2, 1)], CFG).next_offset == 7
