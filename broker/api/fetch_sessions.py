"""Incremental fetch sessions (KIP-227).

epoch -1 with id 0: a sessionless full fetch. epoch 0: a new session (full request; the response
carries the new id). epoch > 0: an incremental request against an existing session: partitions in
the request are added or updated, forgotten ones removed, and the response lists only partitions
with news (records, an error, or a changed high watermark / log start offset). epoch -1 with an id
closes that session.

Session ids are random positive 31-bit ints, unique among the live sessions (as Kafka draws
them): a session is not bound to a connection, so an id another client could guess (they were
1, 2, 3... once) would let it read on, or break, someone else's session.
"""

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from kio.schema.errors import ErrorCode

MAX_SESSIONS: Final = 1000
FINAL_EPOCH: Final = -1
INITIAL_EPOCH: Final = 0
MAX_SESSION_ID: Final = (1 << 31) - 1  # the wire's int32, positive


def random_session_id() -> int:
    """A session id no other client can predict: 1..2**31-1 from the OS's CSPRNG."""
    return 1 + secrets.randbelow(MAX_SESSION_ID)


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
    def __init__(
        self, max_sessions: int = MAX_SESSIONS, new_id: Callable[[], int] = random_session_id
    ) -> None:
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._new_id = new_id
        self._max = max_sessions

    def _unused_id(self) -> int:
        """A fresh random id, drawn again while a live session has it (0 means no session)."""
        while True:
            sid = self._new_id()
            if sid > 0 and sid not in self._sessions:
                return sid

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
            new = FetchSession(self._unused_id(), 1, uses_topic_ids=uses_topic_ids)
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
