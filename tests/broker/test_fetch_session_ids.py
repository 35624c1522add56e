"""Fetch session ids are random positive 31-bit ints, unique among the live sessions (Kafka's
FetchSessionCache draws them the same way): sessions are not bound to connections, so the
sequential ids of before (1, 2, 3...) let one client guess, read on and break another's."""

import itertools

import pytest
from kio.schema.errors import ErrorCode

from broker.api.fetch_sessions import (
    MAX_SESSION_ID,
    FetchSessionCache,
    SessionError,
    random_session_id,
)


def _new(cache: FetchSessionCache) -> int:
    session, full = cache.resolve(0, 0)
    assert session is not None and full
    return session.id


def test_ids_are_random_positive_int32_and_not_sequential() -> None:
    cache = FetchSessionCache()
    ids = [_new(cache) for _ in range(500)]
    assert len(set(ids)) == 500
    assert all(1 <= i <= MAX_SESSION_ID == 2**31 - 1 for i in ids)
    # sequential or small ids (the old 1, 2, 3...) would be guessable
    steps = {b - a for a, b in itertools.pairwise(ids)}
    assert steps != {1} and max(ids) > 2**24, ids[:10]
    # a neighbour of a live id is (all but surely) no session: FETCH_SESSION_ID_NOT_FOUND
    live = set(ids)
    guess = next(i + 1 for i in ids if i + 1 not in live and i + 1 <= MAX_SESSION_ID)
    with pytest.raises(SessionError) as e:
        cache.resolve(guess, 1)
    assert e.value.code == ErrorCode.fetch_session_id_not_found


def test_a_drawn_id_a_live_session_holds_is_drawn_again() -> None:
    draws = iter([5, 5, 0, 9, 9, 5, 11, 5])
    cache = FetchSessionCache(max_sessions=2, new_id=lambda: next(draws))
    assert _new(cache) == 5
    assert _new(cache) == 9  # 5 is live, 0 means "no session"
    assert _new(cache) == 11  # 9 and 5 are live; then 5, the least recently used, is evicted
    assert _new(cache) == 5  # free again
    assert len(cache) == 2


def test_the_random_source_covers_the_range() -> None:
    values = [random_session_id() for _ in range(2000)]
    assert min(values) >= 1 and max(values) <= MAX_SESSION_ID
    assert max(values) > MAX_SESSION_ID // 2 > min(values)
