"""The fetching side of incremental fetch sessions (KIP-227; Kafka's FetchSessionHandler),
sans-IO: which partitions a Fetch must name, which it forgets, and the session id and epoch.

The first request of a session is full (epoch 0, every partition); the broker answers it with a
session id. Each later request (epoch 1, 2, ...) names only the partitions whose fetch fields
changed since the last answered request, and forgets the ones no longer wanted; the broker
keeps the rest and answers only partitions with news. A session error, a failed request or an
answer without a session id starts over with a full request; an answer that is lost (no
``on_response`` after ``build``) does the same, since the broker may or may not have moved its
epoch on.

Partitions are keyed by topic name, topic id and index, so a topic recreated under the same name
is forgotten under its old id and added under the new one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .fetch_codec import FetchPartitionRequest

INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
SESSIONLESS_ID: Final = 0
# FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR: the
# session is gone or out of step; a full request starts a new one at once
SESSION_ERRORS: Final = frozenset({70, 71, 106})

_Key = tuple[str, uuid.UUID | None, int]


@dataclass(frozen=True, slots=True)
class SessionFetch:
    """What one Fetch request carries for the session."""

    session_id: int
    session_epoch: int
    partitions: list[FetchPartitionRequest]
    forgotten: list[tuple[str, uuid.UUID | None, int]]
    full: bool


class FetchSessionBuilder:
    def __init__(self, *, enabled: bool = True) -> None:
        # ``enabled`` False (a broker below Fetch v7): every request full and sessionless
        self.enabled = enabled
        self.session_id = SESSIONLESS_ID
        self.epoch = INITIAL_EPOCH
        self._session: dict[_Key, FetchPartitionRequest] = {}
        self._pending: dict[_Key, FetchPartitionRequest] | None = None
        # the ``wanted`` list behind ``_session`` / ``_pending``: the same list again (a
        # fetcher reuses unchanged entries) is an empty incremental request, found with one
        # list comparison instead of a dict of every partition
        self._session_list: list[FetchPartitionRequest] | None = None
        self._pending_list: list[FetchPartitionRequest] | None = None

    def reset(self) -> None:
        """Start over: the next request is full. The old session id goes with it (epoch 0 with
        an id closes that session on the broker and opens a new one)."""
        self.epoch = INITIAL_EPOCH
        self._session = {}
        self._pending = None
        self._session_list = self._pending_list = None

    def build(self, wanted: Iterable[FetchPartitionRequest]) -> SessionFetch:
        """The next request for ``wanted`` (each partition's current fetch fields)."""
        if self._pending is not None:
            self.reset()  # the last request got no answer: its effect on the broker is unknown
        wanted = list(wanted)
        if (
            self.enabled
            and self.epoch != INITIAL_EPOCH
            and self._session_list is not None
            and wanted == self._session_list
        ):
            self._pending, self._pending_list = self._session, self._session_list
            return SessionFetch(self.session_id, self.epoch, [], [], False)
        current = {(p.topic, p.topic_id, p.partition): p for p in wanted}
        self._pending, self._pending_list = current, wanted
        if not self.enabled:
            return SessionFetch(SESSIONLESS_ID, FINAL_EPOCH, list(current.values()), [], True)
        if self.epoch == INITIAL_EPOCH:
            return SessionFetch(self.session_id, INITIAL_EPOCH, list(current.values()), [], True)
        last = self._session
        # ``is`` first: a fetcher hands the same entry again while nothing changed
        changed = [p for k, p in current.items() if (q := last.get(k)) is not p and q != p]
        forgotten = [k for k in self._session if k not in current]
        return SessionFetch(self.session_id, self.epoch, changed, forgotten, False)

    def on_response(self, error_code: int, session_id: int) -> None:
        """The answer to the last ``build``: its top-level error and session id."""
        sent, self._pending = self._pending, None
        sent_list, self._pending_list = self._pending_list, None
        if not self.enabled:
            return
        if error_code != 0 or session_id == SESSIONLESS_ID or sent is None:
            # a session error (or the broker keeps no sessions): full requests from here on
            self.session_id = session_id if error_code == 0 else self.session_id
            self.epoch = INITIAL_EPOCH
            self._session = {}
            self._session_list = None
            return
        if self.epoch == INITIAL_EPOCH or session_id != self.session_id:
            self.session_id = session_id
            self.epoch = 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < 2**31 - 1 else 1
        self._session = sent
        self._session_list = sent_list

    def on_failure(self) -> None:
        """The request failed (connection lost, a bad answer): the next one is full."""
        self.reset()

    def __len__(self) -> int:
        return len(self._session)
