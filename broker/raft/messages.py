"""The KRaft RPCs as the Raft core sees them: plain frozen dataclasses, no codec.

Field names follow Kafka's JSON schemas (Vote 52, BeginQuorumEpoch 53, EndQuorumEpoch 54, Fetch 1,
FetchSnapshot 59), flattened to the single ``__cluster_metadata-0`` partition the quorum serves:
the per-topic/per-partition nesting, topic ids, directory ids and endpoints are the wire shell's
business. Where the wire uses -1 for "absent" (leader id, diverging epoch, snapshot id), the core
uses -1 for ids and ``None`` for the optional structs; the shell maps one to the other.

A request and its response share a correlation id, carried next to the message (see
``core.Send``), never inside it.
"""

from dataclasses import dataclass, field

# Error codes: Kafka's ints (checked against kio's ErrorCode in tests/broker/test_raft_core.py).
NONE = 0
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
BROKER_NOT_AVAILABLE = 8
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
INCONSISTENT_VOTER_SET = 94
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INCONSISTENT_CLUSTER_ID = 104
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127
UNSUPPORTED_VERSION = 35

NO_LEADER = -1


# Control record types the core writes and reads (Kafka's ControlRecordType).
LEADER_CHANGE = 2
KRAFT_VERSION = 5
KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One replicated entry. ``control`` marks Raft's own entries, of ``control_type``: the
    LeaderChange written at the start of every epoch, and KIP-853's KRaftVersion and Voters
    records; the state machine skips them. The payload is opaque to the core, except a Voters
    or KRaftVersion record's."""

    offset: int
    epoch: int
    payload: bytes
    control: bool = False
    control_type: int = LEADER_CHANGE

    @property
    def is_voters(self) -> bool:
        return self.control and self.control_type == KRAFT_VOTERS

    @property
    def is_kraft_version(self) -> bool:
        return self.control and self.control_type == KRAFT_VERSION


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """Kafka's OffsetAndEpoch: a snapshot id (end offset, epoch) or an epoch-cache answer."""

    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """FetchResponse.DivergingEpoch: the follower must truncate to at most ``end_offset``."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class SnapshotId:
    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    leader_id: int
    leader_epoch: int


# --- Vote (api key 52, v2 carries PreVote: KIP-996) -------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    replica_id: int
    replica_epoch: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False
    voter_id: int = -1
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool


# --- BeginQuorumEpoch (53) / EndQuorumEpoch (54) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    voter_id: int = -1
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


# --- Fetch (1), as KRaft uses it --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    max_entries: int = 1 << 16
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    current_leader: LeaderIdAndEpoch
    high_watermark: int = -1
    log_start_offset: int = -1
    records: tuple[LogEntry, ...] = ()
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None


# --- FetchSnapshot (59) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    current_leader: LeaderIdAndEpoch
    snapshot_id: SnapshotId | None = None
    size: int = -1
    position: int = -1
    unaligned_records: bytes = field(default=b"", repr=False)


RaftRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
RaftMessage = RaftRequest | RaftResponse

REQUEST_TYPES: tuple[type, ...] = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
)
