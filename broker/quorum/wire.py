"""The KRaft RPCs on the wire <-> the Raft core's messages (``broker.raft.messages``).

Served versions (Kafka 3.9/4.x): Vote (52) v0-2, BeginQuorumEpoch (53) v0-1, EndQuorumEpoch (54)
v0-1, FetchSnapshot (59) v0-1, and Fetch (1) on ``__cluster_metadata-0`` (topic id
``AAAAAAAAAAAAAAAAAAAAAQ`` from v13, the name before). Each RPC names one topic and partition;
the core serves exactly ``__cluster_metadata-0``, so ``request_*`` refuse anything else and
``*_body`` fill it in. Requests go out as dicts for ``protocol.build.build`` (the version's
fields are kept, the others dropped), so one description serves every version.

Where the wire says -1 for "absent" (diverging epoch, snapshot id), the core has ``None``;
record batches on the wire are entries in the core (``entries``).
"""

from __future__ import annotations

from typing import Any, Final

from ..metadata.image import METADATA_TOPIC_ID
from ..raft import messages as m
from .entries import decode_entries, encode_entries

METADATA_TOPIC: Final = "__cluster_metadata"
VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH_SNAPSHOT, FETCH = 52, 53, 54, 59, 1


class NotMetadataPartition(ValueError):
    """A KRaft RPC about another partition than ``__cluster_metadata-0``."""


def _only(topics: Any, name_attr: str = "topic_name") -> Any:
    """The single partition entry of a single-topic KRaft request/response."""
    if len(topics) != 1:
        raise NotMetadataPartition(f"{len(topics)} topics in a KRaft request")
    topic = topics[0]
    name = getattr(topic, name_attr, None)
    if name is not None and name != METADATA_TOPIC:
        raise NotMetadataPartition(f"topic {name!r} is not {METADATA_TOPIC}")
    if len(topic.partitions) != 1:
        raise NotMetadataPartition(f"{len(topic.partitions)} partitions in a KRaft request")
    part = topic.partitions[0]
    index = getattr(part, "partition_index", getattr(part, "partition", getattr(part, "index", 0)))
    if int(index) != 0:
        raise NotMetadataPartition(f"partition {index} of {METADATA_TOPIC}")
    return part


def _leader(obj: Any) -> m.LeaderIdAndEpoch:
    return m.LeaderIdAndEpoch(int(obj.leader_id), int(obj.leader_epoch))


# --- Vote ---------------------------------------------------------------------------------------


def vote_request_body(req: m.VoteRequest) -> dict[str, Any]:
    return {
        "cluster_id": req.cluster_id,
        "voter_id": req.voter_id,
        "topics": [
            {
                "topic_name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "replica_epoch": req.replica_epoch,
                        "replica_id": req.replica_id,
                        "candidate_epoch": req.replica_epoch,  # v0 names
                        "candidate_id": req.replica_id,
                        "last_offset_epoch": req.last_offset_epoch,
                        "last_offset": req.last_offset,
                        "pre_vote": req.pre_vote,
                    }
                ],
            }
        ],
    }


def parse_vote_request(body: Any) -> m.VoteRequest:
    p = _only(body.topics)
    return m.VoteRequest(
        replica_id=int(getattr(p, "replica_id", getattr(p, "candidate_id", -1))),
        replica_epoch=int(getattr(p, "replica_epoch", getattr(p, "candidate_epoch", -1))),
        last_offset_epoch=int(p.last_offset_epoch),
        last_offset=int(p.last_offset),
        pre_vote=bool(getattr(p, "pre_vote", False)),
        voter_id=int(getattr(body, "voter_id", -1)),
        cluster_id=body.cluster_id,
    )


def vote_response_body(resp: m.VoteResponse) -> dict[str, Any]:
    return {
        "error_code": 0,
        "topics": [
            {
                "topic_name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": resp.error_code,
                        "leader_id": resp.leader_id,
                        "leader_epoch": resp.leader_epoch,
                        "vote_granted": resp.vote_granted,
                    }
                ],
            }
        ],
    }


def parse_vote_response(body: Any) -> m.VoteResponse:
    if int(body.error_code) != 0:
        return m.VoteResponse(int(body.error_code), m.NO_LEADER, -1, False)
    p = _only(body.topics)
    return m.VoteResponse(
        int(p.error_code), int(p.leader_id), int(p.leader_epoch), bool(p.vote_granted)
    )


# --- BeginQuorumEpoch / EndQuorumEpoch ----------------------------------------------------------


def begin_request_body(req: m.BeginQuorumEpochRequest) -> dict[str, Any]:
    return {
        "cluster_id": req.cluster_id,
        "voter_id": req.voter_id,
        "topics": [
            {
                "topic_name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_id": req.leader_id,
                        "leader_epoch": req.leader_epoch,
                    }
                ],
            }
        ],
    }


def parse_begin_request(body: Any) -> m.BeginQuorumEpochRequest:
    p = _only(body.topics)
    return m.BeginQuorumEpochRequest(
        int(p.leader_id),
        int(p.leader_epoch),
        voter_id=int(getattr(body, "voter_id", -1)),
        cluster_id=body.cluster_id,
    )


def end_request_body(req: m.EndQuorumEpochRequest) -> dict[str, Any]:
    return {
        "cluster_id": req.cluster_id,
        "topics": [
            {
                "topic_name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_id": req.leader_id,
                        "leader_epoch": req.leader_epoch,
                        "preferred_successors": list(req.preferred_successors),  # v0
                        "preferred_candidates": [  # v1
                            {"candidate_id": c} for c in req.preferred_successors
                        ],
                    }
                ],
            }
        ],
    }


def parse_end_request(body: Any) -> m.EndQuorumEpochRequest:
    p = _only(body.topics)
    if hasattr(p, "preferred_candidates"):
        successors = tuple(int(c.candidate_id) for c in p.preferred_candidates)
    else:
        successors = tuple(int(s) for s in p.preferred_successors)
    return m.EndQuorumEpochRequest(
        int(p.leader_id), int(p.leader_epoch), successors, cluster_id=body.cluster_id
    )


def epoch_response_body(
    resp: m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse,
) -> dict[str, Any]:
    return {
        "error_code": 0,
        "topics": [
            {
                "topic_name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": resp.error_code,
                        "leader_id": resp.leader_id,
                        "leader_epoch": resp.leader_epoch,
                    }
                ],
            }
        ],
    }


def parse_begin_response(body: Any) -> m.BeginQuorumEpochResponse:
    if int(body.error_code) != 0:
        return m.BeginQuorumEpochResponse(int(body.error_code), m.NO_LEADER, -1)
    p = _only(body.topics)
    return m.BeginQuorumEpochResponse(int(p.error_code), int(p.leader_id), int(p.leader_epoch))


def parse_end_response(body: Any) -> m.EndQuorumEpochResponse:
    if int(body.error_code) != 0:
        return m.EndQuorumEpochResponse(int(body.error_code), m.NO_LEADER, -1)
    p = _only(body.topics)
    return m.EndQuorumEpochResponse(int(p.error_code), int(p.leader_id), int(p.leader_epoch))


# --- Fetch on __cluster_metadata-0 --------------------------------------------------------------


def fetch_request_body(req: m.FetchRequest, max_bytes: int = 8 * 1024 * 1024) -> dict[str, Any]:
    return {
        "cluster_id": req.cluster_id,
        "replica_id": req.replica_id,  # before v15
        "replica_state": {"replica_id": req.replica_id, "replica_epoch": -1},  # v15+
        "max_wait": req.max_wait_ms,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": METADATA_TOPIC,
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": req.current_leader_epoch,
                        "fetch_offset": req.fetch_offset,
                        "last_fetched_epoch": req.last_fetched_epoch,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def is_metadata_fetch(body: Any) -> bool:
    """A Fetch for ``__cluster_metadata`` (by id from v13, by name before)."""
    topics: Any = getattr(body, "topics", ())
    if len(topics) != 1:
        return False
    t = topics[0]
    return getattr(t, "topic_id", None) == METADATA_TOPIC_ID or getattr(t, "topic", None) == (
        METADATA_TOPIC
    )


def parse_fetch_request(body: Any) -> m.FetchRequest:
    if not is_metadata_fetch(body):
        raise NotMetadataPartition("a KRaft Fetch names __cluster_metadata only")
    p = _only(body.topics, name_attr="topic")
    state = getattr(body, "replica_state", None)
    replica_id = int(state.replica_id) if state is not None else int(body.replica_id)
    wait = body.max_wait
    return m.FetchRequest(
        replica_id=replica_id,
        # absent before Fetch v9 (current_leader_epoch) and v12 (last_fetched_epoch): -1
        current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
        fetch_offset=int(p.fetch_offset),
        last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
        max_wait_ms=int(wait.total_seconds() * 1000)
        if hasattr(wait, "total_seconds")
        else int(wait),
        cluster_id=getattr(body, "cluster_id", None),
    )


def fetch_response_body(resp: m.FetchResponse, now_ms: int) -> dict[str, Any]:
    diverging = resp.diverging_epoch
    snapshot = resp.snapshot_id
    return {
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": METADATA_TOPIC,
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": resp.error_code,
                        "high_watermark": resp.high_watermark,
                        "last_stable_offset": resp.high_watermark,
                        "log_start_offset": resp.log_start_offset,
                        "diverging_epoch": {
                            "epoch": diverging.epoch if diverging else -1,
                            "end_offset": diverging.end_offset if diverging else -1,
                        },
                        "current_leader": {
                            "leader_id": resp.current_leader.leader_id,
                            "leader_epoch": resp.current_leader.leader_epoch,
                        },
                        "snapshot_id": {
                            "end_offset": snapshot.end_offset if snapshot else -1,
                            "epoch": snapshot.epoch if snapshot else -1,
                        },
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": encode_entries(resp.records, now_ms) if resp.records else None,
                    }
                ],
            }
        ],
    }


def parse_fetch_response(body: Any) -> m.FetchResponse:
    if int(body.error_code) != 0:
        return m.FetchResponse(int(body.error_code), m.LeaderIdAndEpoch(m.NO_LEADER, -1))
    p = _only(body.responses, name_attr="topic")
    div = getattr(p, "diverging_epoch", None)
    snap = getattr(p, "snapshot_id", None)
    records = p.records
    return m.FetchResponse(
        error_code=int(p.error_code),
        current_leader=_leader(p.current_leader),
        high_watermark=int(p.high_watermark),
        log_start_offset=int(p.log_start_offset),
        records=tuple(decode_entries(records)) if records else (),
        diverging_epoch=(
            m.EpochEndOffset(int(div.epoch), int(div.end_offset))
            if div is not None and int(div.epoch) >= 0
            else None
        ),
        snapshot_id=(
            m.SnapshotId(int(snap.end_offset), int(snap.epoch))
            if snap is not None and int(snap.end_offset) >= 0
            else None
        ),
    )


# --- FetchSnapshot ------------------------------------------------------------------------------


def fetch_snapshot_request_body(req: m.FetchSnapshotRequest) -> dict[str, Any]:
    return {
        "cluster_id": req.cluster_id,
        "replica_id": req.replica_id,
        "max_bytes": req.max_bytes,
        "topics": [
            {
                "name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": req.current_leader_epoch,
                        "snapshot_id": {
                            "end_offset": req.snapshot_id.end_offset,
                            "epoch": req.snapshot_id.epoch,
                        },
                        "position": req.position,
                    }
                ],
            }
        ],
    }


def parse_fetch_snapshot_request(body: Any) -> m.FetchSnapshotRequest:
    p = _only(body.topics, name_attr="name")
    return m.FetchSnapshotRequest(
        replica_id=int(body.replica_id),
        current_leader_epoch=int(p.current_leader_epoch),
        snapshot_id=m.SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
        position=int(p.position),
        max_bytes=int(body.max_bytes),
        cluster_id=getattr(body, "cluster_id", None),
    )


def fetch_snapshot_response_body(resp: m.FetchSnapshotResponse) -> dict[str, Any]:
    snap = resp.snapshot_id
    return {
        "error_code": 0,
        "topics": [
            {
                "name": METADATA_TOPIC,
                "partitions": [
                    {
                        "index": 0,
                        "error_code": resp.error_code,
                        "snapshot_id": {
                            "end_offset": snap.end_offset if snap else -1,
                            "epoch": snap.epoch if snap else -1,
                        },
                        "current_leader": {
                            "leader_id": resp.current_leader.leader_id,
                            "leader_epoch": resp.current_leader.leader_epoch,
                        },
                        "size": resp.size,
                        "position": resp.position,
                        "unaligned_records": resp.unaligned_records,
                    }
                ],
            }
        ],
    }


def parse_fetch_snapshot_response(body: Any) -> m.FetchSnapshotResponse:
    if int(body.error_code) != 0:
        return m.FetchSnapshotResponse(int(body.error_code), m.LeaderIdAndEpoch(m.NO_LEADER, -1))
    p = _only(body.topics, name_attr="name")
    snap = p.snapshot_id
    return m.FetchSnapshotResponse(
        error_code=int(p.error_code),
        current_leader=_leader(p.current_leader),
        snapshot_id=(
            m.SnapshotId(int(snap.end_offset), int(snap.epoch))
            if int(snap.end_offset) >= 0
            else None
        ),
        size=int(p.size),
        position=int(p.position),
        unaligned_records=bytes(p.unaligned_records or b""),
    )


def node_endpoints(body: Any, listener: str | None = None) -> list[tuple[int, str, int]]:
    """(node id, host, port) from a response's NodeEndpoints (Fetch v16+, the KRaft RPCs v1+):
    where the leaders it names listen. None of them when absent."""
    out = []
    for ep in getattr(body, "node_endpoints", None) or ():
        listener_name = getattr(ep, "listener", None) or getattr(ep, "name", None)
        if listener is not None and listener_name not in (None, listener):
            continue
        out.append((int(ep.node_id), str(ep.host), int(ep.port)))
    return out
