"""The fetching side of incremental fetch sessions, driven against the broker's session cache
(``broker.api.fetch_sessions``) so both halves agree on ids and epochs."""

from __future__ import annotations

import uuid

import pytest

from broker.api.fetch_sessions import FetchSessionCache, SessionError
from protocol.fetch_codec import FetchPartitionRequest
from protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchSessionBuilder

TID = uuid.uuid4()


def part(
    partition: int, offset: int, *, epoch: int = 3, tid: uuid.UUID = TID
) -> FetchPartitionRequest:
    return FetchPartitionRequest("t", tid, partition, offset, epoch, 2, 0, 1 << 20)


def answer(
    cache: FetchSessionCache, b: FetchSessionBuilder, wanted: list[FetchPartitionRequest]
) -> list[int]:
    """One round trip: the partitions the request named."""
    f = b.build(wanted)
    try:
        session, _full = cache.resolve(f.session_id, f.session_epoch)
    except SessionError as e:
        b.on_response(e.code, f.session_id)
        return []
    b.on_response(0, session.id if session else 0)
    return [p.partition for p in f.partitions]


def test_first_request_is_full_then_only_changes_are_named() -> None:
    cache, b = FetchSessionCache(), FetchSessionBuilder()
    first = b.build([part(0, 10), part(1, 20)])
    assert first.full and first.session_epoch == INITIAL_EPOCH and first.session_id == 0
    session, full = cache.resolve(first.session_id, first.session_epoch)
    assert full and session is not None
    b.on_response(0, session.id)
    assert b.session_id == session.id and b.epoch == 1

    nothing = b.build([part(0, 10), part(1, 20)])
    assert not nothing.full and nothing.partitions == [] and nothing.forgotten == []
    cache.resolve(nothing.session_id, nothing.session_epoch)
    b.on_response(0, session.id)

    moved = b.build([part(0, 15), part(1, 20)])
    assert [p.fetch_offset for p in moved.partitions] == [15]
    assert moved.session_epoch == 2
    cache.resolve(moved.session_id, moved.session_epoch)
    b.on_response(0, session.id)

    dropped = b.build([part(1, 20)])
    assert dropped.partitions == [] and dropped.forgotten == [("t", TID, 0)]


def test_a_new_leader_epoch_or_a_recreated_topic_is_named_again() -> None:
    cache, b = FetchSessionCache(), FetchSessionBuilder()
    answer(cache, b, [part(0, 10)])
    f = b.build([part(0, 10, epoch=4)])
    assert [p.current_leader_epoch for p in f.partitions] == [4]
    b.on_response(0, b.session_id)
    other = uuid.uuid4()
    g = b.build([part(0, 0, tid=other)])
    assert [p.topic_id for p in g.partitions] == [other]
    assert g.forgotten == [("t", TID, 0)]


def test_session_errors_and_lost_answers_start_over_with_a_full_request() -> None:
    cache, b = FetchSessionCache(), FetchSessionBuilder()
    assert answer(cache, b, [part(0, 10), part(1, 20)]) == [0, 1]
    assert answer(cache, b, [part(0, 10), part(1, 20)]) == []
    # the broker restarted: its cache is empty
    cache = FetchSessionCache()
    assert answer(cache, b, [part(0, 10), part(1, 20)]) == []  # FETCH_SESSION_ID_NOT_FOUND
    assert b.epoch == INITIAL_EPOCH
    assert answer(cache, b, [part(0, 10), part(1, 20)]) == [0, 1]  # a new session, full
    # a request whose answer never came: the next one is full again
    b.build([part(0, 11), part(1, 20)])
    f = b.build([part(0, 11), part(1, 20)])
    assert f.full and f.session_epoch == INITIAL_EPOCH and len(f.partitions) == 2
    # epoch 0 with the old id replaces the old session on the broker
    before = len(cache)
    session, full = cache.resolve(f.session_id, f.session_epoch)
    assert full and session is not None and len(cache) == before
    b.on_response(0, session.id)
    b.build([part(0, 11)])
    b.on_failure()
    assert b.build([part(0, 11)]).full


def test_an_answer_without_a_session_keeps_requests_full() -> None:
    b = FetchSessionBuilder()
    b.build([part(0, 1)])
    b.on_response(0, 0)
    f = b.build([part(0, 1)])
    assert f.full and f.session_epoch == INITIAL_EPOCH


def test_disabled_sessions_send_sessionless_full_requests() -> None:
    b = FetchSessionBuilder(enabled=False)
    for _ in range(2):
        f = b.build([part(0, 1), part(1, 2)])
        assert f.full and f.session_id == 0 and f.session_epoch == FINAL_EPOCH
        assert len(f.partitions) == 2
        b.on_response(0, 0)


def test_the_epoch_wraps_to_one() -> None:
    b = FetchSessionBuilder()
    b.build([part(0, 1)])
    b.on_response(0, 7)
    b.epoch = 2**31 - 1
    b.build([part(0, 1)])
    b.on_response(0, 7)
    assert b.epoch == 1


@pytest.mark.parametrize("code", [70, 71, 106])
def test_each_session_error_resets(code: int) -> None:
    b = FetchSessionBuilder()
    b.build([part(0, 1)])
    b.on_response(0, 7)
    b.build([part(0, 1)])
    b.on_response(code, 0)
    f = b.build([part(0, 1)])
    assert f.full and f.session_id == 7 and f.session_epoch == INITIAL_EPOCH


def test_the_same_entries_again_are_an_empty_request_and_a_lost_answer_still_starts_over() -> None:
    """A fetcher hands the very same entries while nothing moved: one list comparison finds
    the request empty; what it then changes, adds or drops is still named."""
    cache, b = FetchSessionCache(), FetchSessionBuilder()
    entries = [part(p, 10 * p) for p in range(5)]
    assert answer(cache, b, entries) == [0, 1, 2, 3, 4]
    assert answer(cache, b, list(entries)) == []
    assert answer(cache, b, list(entries)) == []
    moved = [*entries[:2], part(2, 99), *entries[3:]]
    assert answer(cache, b, moved) == [2]
    assert answer(cache, b, list(moved)) == []
    f = b.build(moved[:4])
    assert f.partitions == [] and f.forgotten == [("t", TID, 4)]
    # that answer is lost: the next request is full, even with the same entries
    again = b.build(list(moved))
    assert again.full and [p.partition for p in again.partitions] == [0, 1, 2, 3, 4]
