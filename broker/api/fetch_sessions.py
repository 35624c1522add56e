"""Incremental fetch sessions (KIP-227).

epoch -1 with id 0: a sessionless full fetch. epoch 0: a new session (full request; the response
carries the new id). epoch > 0: an incremental request against an existing session: partitions in
the request are added or updated, forgotten ones removed, and the response lists only partitions
with news (records, an error, or a changed high watermark / log start offset). epoch -1 with an id
closes that session.
"""

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from kio.schema.errors import ErrorCode

MAX_SESSIONS: Final = 1000
FINAL_EPOCH: Final = -1
INITIAL_EPOCH: Final = 0


@dataclass(slots=True)
class SessionPartition:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1  # a follower's divergence check (v12+)
    log_start_offset: int = -1  # a follower's own log start
    last_hw: int = -1
    last_lso: int = -1
    last_log_start: int = -1
    # a follower's partition found caught up with nothing to answer: (the partition, its
    # ``change_seq`` then); until that moves, the session's fetches skip it (FetchApi._read)
    quiet: Any = None


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int
    # (topic key, partition) -> state; topic key is the name (v<13) or the topic id (v13+)
    partitions: "OrderedDict[tuple[Any, int], SessionPartition]" = field(
        default_factory=OrderedDict
    )
    uses_topic_ids: bool = False  # created by a v13+ request: its keys are topic ids


class SessionError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)
        self._max = max_sessions

    def __len__(self) -> int:
        return len(self._sessions)

    def resolve(
        self, session_id: int, epoch: int, uses_topic_ids: bool = False
    ) -> tuple[FetchSession | None, bool]:
        """The session for a request and whether the request is a full one. A session keyed
        by topic names cannot go on with topic ids, or the other way round (Kafka:
        FETCH_SESSION_TOPIC_ID_ERROR; the client starts a new session)."""
        if epoch == FINAL_EPOCH:
            if session_id:
                self._sessions.pop(session_id, None)
            return None, True
        if epoch == INITIAL_EPOCH:
            if session_id:
                self._sessions.pop(session_id, None)
            new = FetchSession(next(self._ids), 1, uses_topic_ids=uses_topic_ids)
            self._sessions[new.id] = new
            while len(self._sessions) > self._max:
                self._sessions.popitem(last=False)  # evict the least recently used
            return new, True
        s = self._sessions.get(session_id)
        if s is None:
            raise SessionError(ErrorCode.fetch_session_id_not_found)
        if s.epoch != epoch:
            raise SessionError(ErrorCode.invalid_fetch_session_epoch)
        if s.uses_topic_ids != uses_topic_ids:
            raise SessionError(ErrorCode.fetch_session_topic_id_error)
        s.epoch += 1
        self._sessions.move_to_end(session_id)
        return s, False
