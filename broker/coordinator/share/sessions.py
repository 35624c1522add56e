"""KIP-932 share sessions on one broker, keyed by (group id, member id). Sans-IO.

ShareSessionEpoch 0 opens a session (replacing the member's previous one), -1 closes it, any
other value must be the session's next epoch, which then moves on by one: no session ->
SHARE_SESSION_NOT_FOUND, another epoch -> INVALID_SHARE_SESSION_EPOCH. A session remembers the
partitions the member fetches, so incremental requests only name what changed. At most
`max_sessions` live at once (group.share.max.share.sessions); when full, sessions idle for
longer than the eviction time make way, else SHARE_SESSION_LIMIT_REACHED.
"""

import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_MAX_EPOCH = 2**31 - 1

TopicPartitionId = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    last_used_ms: int
    partitions: set[TopicPartitionId] = field(default_factory=set)


class ShareSessions:
    def __init__(self, max_sessions: int = 2_000, evict_idle_ms: int = 45_000) -> None:
        self.max_sessions = max_sessions
        self.evict_idle_ms = evict_idle_ms
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str, now_ms: int) -> ShareSession | ErrorCode:
        key = (group_id, member_id)
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            self._evict_idle(now_ms)
            if len(self.sessions) >= self.max_sessions:
                return ErrorCode.share_session_limit_reached
        session = ShareSession(group_id, member_id, 1, now_ms)
        self.sessions[key] = session
        return session

    def use(
        self, group_id: str, member_id: str, epoch: int, now_ms: int
    ) -> ShareSession | ErrorCode:
        """A request in an existing session (epoch > 0, or FINAL_EPOCH to end it)."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.share_session_not_found
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch
        session.epoch = 1 if session.epoch >= _MAX_EPOCH else session.epoch + 1
        session.last_used_ms = now_ms
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def _evict_idle(self, now_ms: int) -> None:
        idle = [k for k, s in self.sessions.items() if now_ms - s.last_used_ms > self.evict_idle_ms]
        for k in idle:
            del self.sessions[k]
