"""The Raft core's configuration and its outputs (what the shell must do after each call)."""

from dataclasses import dataclass

from broker.raft import messages as m


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's controller.quorum.* settings (defaults as in Kafka)."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_entries: int = 1 << 16
    snapshot_chunk_bytes: int = 1 << 20
    max_bytes_between_snapshots: int = 20 * 1024 * 1024
    # KIP-876: ask for a snapshot once a committed entry no snapshot holds is this old;
    # 0: never by time
    max_snapshot_interval_ms: int = 3_600_000
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class Send:
    dest: int
    correlation_id: int
    message: m.RaftMessage


@dataclass(frozen=True, slots=True)
class Committed:
    high_watermark: int


@dataclass(frozen=True, slots=True)
class LeaderChange:
    leader_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotWanted:
    end_offset: int


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    snapshot_id: m.SnapshotId


@dataclass(frozen=True, slots=True)
class VoterChangeDone:
    """The answer to a voter change (``add_voter``/``remove_voter``/``update_voter``) that did
    not complete at once: committed (NONE) or failed (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER)."""

    op_id: int
    error_code: int
    message: str | None = None


@dataclass(frozen=True, slots=True)
class NotLeader:
    leader_id: int
    epoch: int


Output = Send | Committed | LeaderChange | SnapshotWanted | SnapshotLoaded | VoterChangeDone


class RaftInvariantError(Exception):
    """A message or state that the protocol rules out (a peer's bug or ours): never ignored."""
