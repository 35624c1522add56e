"""What ``kafka-metadata-quorum.sh describe`` prints, in Apache Kafka's format (its
``MetadataQuorumCommand``, Kafka 4.x):

``--status``: one ``Key:`` line each, values in column 25::

    ClusterId:              <cluster id>
    LeaderId:               <id>
    LeaderEpoch:            <epoch>
    HighWatermark:          <offset>
    MaxFollowerLag:         <leader end offset - smallest voter end offset>
    MaxFollowerLagTimeMs:   <leader caught-up time - that voter's; 0 if it is the leader>
    CurrentVoters:          [{"id": 1, "endpoints": ["CONTROLLER://host:9093"]}, ...]
    CurrentObservers:       [{"id": 4}, ...]

(``"directoryId"`` appears only for a replica with a directory id; ``"endpoints"`` only when
the response's Nodes list that replica.) MaxFollowerLagTimeMs is -1 when either caught-up time
is unknown; the "follower" is the first voter with the smallest end offset, in the response's
order.

``--replication``: a table of NodeId, DirectoryId (Kafka's base64 uuid; all ``A`` for none),
LogEndOffset, Lag (leader's end offset minus the replica's), LastFetchTimestamp,
LastCaughtUpTimestamp (-1 when unknown; ``<n> ms ago`` with ``--human-readable``) and Status
(Leader, then Follower voters, then Observers). Each cell is padded to its column's widest
value and followed by a tab, so every line ends with a tab, as Kafka's ToolsUtils prints it.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

HEADERS = (
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
)


class FormatError(Exception):
    """The quorum cannot be shown (no leader among the voters, clock drift)."""


@dataclass(frozen=True, slots=True)
class Replica:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int | None = None  # None: unknown (-1 on the wire)
    last_caught_up_timestamp: int | None = None
    directory_id: uuid.UUID | None = None  # None: no directory id (the zero uuid)


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The admin client's QuorumInfo: the leader's DescribeQuorum answer."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: Sequence[Replica]
    observers: Sequence[Replica]
    # node id -> its endpoints (listener name, host, port), from the v2 Nodes list
    nodes: Mapping[int, Sequence[tuple[str, str, int]]] = field(default_factory=dict)


def uuid_string(u: uuid.UUID | None) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    raw = (u or uuid.UUID(int=0)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def endpoint_string(name: str, host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{name}://{shown}:{port}"


def _node(r: Replica, nodes: Mapping[int, Sequence[tuple[str, str, int]]]) -> str:
    parts = [f'"id": {r.replica_id}']
    if r.directory_id is not None and r.directory_id.int != 0:
        parts.append(f'"directoryId": "{uuid_string(r.directory_id)}"')
    endpoints = nodes.get(r.replica_id) or ()
    if endpoints:
        shown = ", ".join(f'"{endpoint_string(*e)}"' for e in endpoints)
        parts.append(f'"endpoints": [{shown}]')
    return "{" + ", ".join(parts) + "}"


def _replicas(rs: Sequence[Replica], nodes: Mapping[int, Sequence[tuple[str, str, int]]]) -> str:
    return "[" + ", ".join(_node(r, nodes) for r in rs) + "]"


def leader_of(info: QuorumInfo) -> Replica:
    for v in info.voters:
        if v.replica_id == info.leader_id:
            return v
    raise FormatError(f"the quorum leader {info.leader_id} is not among the voters")


def format_status(cluster_id: str, info: QuorumInfo) -> str:
    leader = leader_of(info)
    laggard = min(info.voters, key=lambda v: v.log_end_offset)  # the first of the smallest
    lag = leader.log_end_offset - laggard.log_end_offset
    if laggard is leader:
        lag_ms = 0
    elif leader.last_caught_up_timestamp is not None and (
        laggard.last_caught_up_timestamp is not None
    ):
        lag_ms = leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    else:
        lag_ms = -1
    lines = [
        ("ClusterId", cluster_id),
        ("LeaderId", info.leader_id),
        ("LeaderEpoch", info.leader_epoch),
        ("HighWatermark", info.high_watermark),
        ("MaxFollowerLag", lag),
        ("MaxFollowerLagTimeMs", lag_ms),
        ("CurrentVoters", _replicas(info.voters, info.nodes)),
        ("CurrentObservers", _replicas(info.observers, info.nodes)),
    ]
    return "".join(f"{key + ':':<24}{value}\n" for key, value in lines)


def relative_ms(timestamp: int, now_ms: int, what: str) -> int:
    """How long ago ``timestamp`` was; refused for a time not in (epoch, now]."""
    if not 0 < timestamp <= now_ms:
        raise FormatError(
            "Error while computing relative time, possible drift in system clock. "
            f"Current timestamp is {now_ms}, {what} timestamp is {timestamp}"
        )
    return now_ms - timestamp


def _time(ts: int | None, human: bool, now_ms: int, what: str) -> str:
    if ts is None:
        return "-1"
    return f"{relative_ms(ts, now_ms, what)} ms ago" if human else str(ts)


def _rows(
    leader: Replica, rs: Sequence[Replica], status: str, human: bool, now_ms: int
) -> list[list[str]]:
    return [
        [
            str(r.replica_id),
            uuid_string(r.directory_id),
            str(r.log_end_offset),
            str(leader.log_end_offset - r.log_end_offset),
            _time(r.last_fetch_timestamp, human, now_ms, "last fetch"),
            _time(r.last_caught_up_timestamp, human, now_ms, "last caught up"),
            status,
        ]
        for r in rs
    ]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: cells padded to the column width, each + a tab."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    return "".join(
        "".join(f"{cell:<{widths[i]}}\t" for i, cell in enumerate(row)) + "\n"
        for row in (headers, *rows)
    )


def format_replication(info: QuorumInfo, human_readable: bool, now_ms: int) -> str:
    leader = leader_of(info)
    followers = [v for v in info.voters if v.replica_id != info.leader_id]
    rows = [
        *_rows(leader, [leader], "Leader", human_readable, now_ms),
        *_rows(leader, followers, "Follower", human_readable, now_ms),
        *_rows(leader, info.observers, "Observer", human_readable, now_ms),
    ]
    return format_table(HEADERS, rows)
