"""The epoch states of a KRaft replica (Kafka's QuorumState and its EpochState classes).

Each state holds what it needs for one epoch and answers Kafka's vote-granting rules; the
transitions between them live in ``core.RaftCore``. "Voted" is ``Unattached`` with a vote, as in
Kafka 4 (and ``Prospective`` may carry a vote too). Observers only ever are Unattached or
Follower.

Vote rules (KIP-595 plus KIP-996 pre-vote), for a request in the receiver's own epoch, where
``up_to_date`` means the requester's (last epoch, end offset) >= ours:

    state                 pre-vote                              standard vote
    Unattached/Prospective up_to_date                           voted for it, or (no vote, no
                                                                known leader, up_to_date)
    Follower              up_to_date, and no successful fetch   never (it has a leader)
                          from the leader yet this epoch (or
                          the leader announced it resigned)
    Candidate, Resigned   up_to_date                            never (they voted for themselves)
    Leader                never                                 never
"""

from dataclasses import dataclass, field

from broker.raft.leader_state import LeaderState
from broker.raft.messages import SnapshotId

NEVER = 1 << 62  # a deadline that never comes (observers have no election timer)


def unattached_can_grant(
    voted_id: int, leader_id: int, candidate: int, up_to_date: bool, pre_vote: bool
) -> bool:
    if pre_vote:
        return up_to_date
    if voted_id >= 0:
        return voted_id == candidate
    if leader_id >= 0:
        return False
    return up_to_date


@dataclass(slots=True)
class Unattached:
    epoch: int
    voted_id: int
    election_deadline: int

    name = "Unattached"
    leader_id = -1

    def can_grant_vote(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        return unattached_can_grant(self.voted_id, -1, candidate, up_to_date, pre_vote)


@dataclass(slots=True)
class Prospective:
    """Pre-vote phase: the epoch is not bumped; a majority of granted pre-votes makes a Candidate."""

    epoch: int
    leader_id: int
    voted_id: int
    election_deadline: int
    retries: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    name = "Prospective"

    def can_grant_vote(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        return unattached_can_grant(self.voted_id, self.leader_id, candidate, up_to_date, pre_vote)


@dataclass(slots=True)
class Candidate:
    epoch: int
    election_deadline: int
    retries: int
    backoff_until: int = -1  # >= 0 once the election is lost or timed out
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    name = "Candidate"
    leader_id = -1

    def can_grant_vote(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and up_to_date


@dataclass(slots=True)
class SnapshotFetch:
    snapshot_id: SnapshotId
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    voted_id: int
    fetch_deadline: int
    has_fetched: bool = False
    leader_resigned: bool = False
    bootstrapping: bool = False  # an observer whose fetch timer expired asks the voters in turn
    snapshot_fetch: SnapshotFetch | None = None

    name = "Follower"

    def can_grant_vote(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and up_to_date and (not self.has_fetched or self.leader_resigned)


@dataclass(slots=True)
class Resigned:
    """A leader that stepped down (or restarted): it cannot vote again in its epoch."""

    epoch: int
    leader_id: int  # itself
    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacked: set[int]

    name = "Resigned"

    def can_grant_vote(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and up_to_date


EpochState = Unattached | Prospective | Candidate | Follower | Resigned | LeaderState
