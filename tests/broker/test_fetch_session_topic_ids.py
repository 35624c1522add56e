"""A fetch session is keyed by topic names (Fetch v12 and older) or by topic ids (v13+): a
request of the other kind against it is FETCH_SESSION_TOPIC_ID_ERROR, as in Kafka. Mixing them
put a topic name where the v13+ encoder writes a topic id (and the other way round)."""

import pytest
from kio.schema.errors import ErrorCode

from broker.api.fetch_sessions import FetchSessionCache, SessionError


def test_a_session_keeps_the_kind_of_key_it_was_created_with() -> None:
    cache = FetchSessionCache()
    by_name, full = cache.resolve(0, 0, uses_topic_ids=False)
    assert by_name is not None and full
    by_id, _ = cache.resolve(0, 0, uses_topic_ids=True)
    assert by_id is not None
    with pytest.raises(SessionError) as e:
        cache.resolve(by_name.id, 1, uses_topic_ids=True)
    assert e.value.code == ErrorCode.fetch_session_topic_id_error
    with pytest.raises(SessionError) as e:
        cache.resolve(by_id.id, 1, uses_topic_ids=False)
    assert e.value.code == ErrorCode.fetch_session_topic_id_error
    # the refused requests did not advance the sessions; the right kind goes on
    assert cache.resolve(by_name.id, 1, uses_topic_ids=False) == (by_name, False)
    assert cache.resolve(by_id.id, 1, uses_topic_ids=True) == (by_id, False)
