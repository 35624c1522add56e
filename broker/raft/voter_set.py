"""The quorum's voters as KIP-853 keeps them: in the log (Kafka's VoterSet and VoterSetHistory).

A voter is a replica key (node id, directory id) with its endpoints. With ``kraft.version`` 1
the voter set is the value of the newest VotersRecord in the log, *committed or not* (a change
takes effect when it is appended, and is undone when the log is truncated below it); the
snapshot the log starts at carries the set that holds at its end offset. With static voters
(``controller.quorum.voters``, ``kraft.version`` 0) no record is ever written and the
configured ids are the set, with zero directory ids and no endpoints.

``VoterHistory`` keeps every (offset, voter set) the log holds so a truncation can find the
set that held before it; entries below the log start collapse into the base (the snapshot's).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.records.kraft_control import (
    VoterEndpoint,
    VoterEntry,
    decode_voters,
    encode_voters,
)

ZERO_UUID = uuid.UUID(int=0)

__all__ = ["ZERO_UUID", "VoterEndpoint", "VoterEntry", "VoterHistory", "VoterSet"]


@dataclass(frozen=True, slots=True)
class VoterSet:
    """An immutable voter set, by node id."""

    voters: tuple[VoterEntry, ...]

    @staticmethod
    def of_ids(ids: Iterable[int]) -> VoterSet:
        return VoterSet(tuple(VoterEntry(i, ZERO_UUID) for i in sorted(ids)))

    @staticmethod
    def decode(value: bytes) -> VoterSet:
        return VoterSet(tuple(sorted(decode_voters(value), key=lambda v: v.voter_id)))

    def encode(self) -> bytes:
        return encode_voters(self.voters)

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.voter_id for v in self.voters)

    def get(self, voter_id: int) -> VoterEntry | None:
        for v in self.voters:
            if v.voter_id == voter_id:
                return v
        return None

    def has_key(self, voter_id: int, directory_id: uuid.UUID) -> bool:
        v = self.get(voter_id)
        return v is not None and v.directory_id == directory_id

    def add(self, voter: VoterEntry) -> VoterSet:
        if voter.voter_id in self.ids:
            raise ValueError(f"voter {voter.voter_id} is already in the set")
        return VoterSet(tuple(sorted((*self.voters, voter), key=lambda v: v.voter_id)))

    def remove(self, voter_id: int) -> VoterSet:
        return VoterSet(tuple(v for v in self.voters if v.voter_id != voter_id))

    def replace(self, voter: VoterEntry) -> VoterSet:
        return VoterSet(tuple(voter if v.voter_id == voter.voter_id else v for v in self.voters))

    def endpoint(self, voter_id: int, listener: str | None) -> tuple[str, int] | None:
        """The voter's address on ``listener`` (its first endpoint when None)."""
        v = self.get(voter_id)
        if v is None or not v.endpoints:
            return None
        for e in v.endpoints:
            if listener is None or e.name == listener:
                return e.host, e.port
        return None

    def describe(self) -> str:
        return "[" + ", ".join(f"{v.voter_id}:{v.directory_id}" for v in self.voters) + "]"


class VoterHistory:
    """(offset, voter set) pairs from the log, ascending; ``base`` holds below the first."""

    def __init__(self, base: VoterSet | None, base_offset: int = -1) -> None:
        self._entries: list[tuple[int, VoterSet]] = []
        if base is not None:
            self._entries.append((base_offset, base))

    def add(self, offset: int, voters: VoterSet) -> None:
        if self._entries and offset <= self._entries[-1][0]:
            raise ValueError(f"voter set at {offset} not after the one at {self._entries[-1][0]}")
        self._entries.append((offset, voters))

    def truncate_from(self, offset: int) -> None:
        """Forget the sets written at or above ``offset`` (the log was truncated there)."""
        while self._entries and self._entries[-1][0] >= offset:
            self._entries.pop()

    def reset(self, voters: VoterSet | None, offset: int) -> None:
        self._entries = [] if voters is None else [(offset, voters)]

    @property
    def latest(self) -> VoterSet | None:
        return self._entries[-1][1] if self._entries else None

    @property
    def previous(self) -> VoterSet | None:
        """The set the newest record replaced (None if the log holds only one)."""
        return self._entries[-2][1] if len(self._entries) > 1 else None

    @property
    def latest_offset(self) -> int:
        """The offset of the newest VotersRecord (-1 for a snapshot's or none)."""
        return self._entries[-1][0] if self._entries else -1

    def committed(self, high_watermark: int) -> VoterSet | None:
        """The newest set whose record is below the high watermark."""
        for offset, voters in reversed(self._entries):
            if offset < high_watermark:
                return voters
        return None
