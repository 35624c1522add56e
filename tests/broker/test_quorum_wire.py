"""Every KRaft RPC the quorum speaks, core message -> wire bytes (kio's writer) -> our reader ->
core message, at every version served: what goes out is what the peer's core receives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from broker.quorum import wire
from broker.raft import messages as m
from protocol.build import build
from protocol.registry import REGISTRY, body_bytes, decode_body


def _through_request(key: int, version: int, body: dict[str, Any]) -> Any:
    cls = REGISTRY.spec(key).request_type(version)
    return decode_body(cls, body_bytes(build(cls, body)), 0)


def _through_response(key: int, version: int, body: dict[str, Any]) -> Any:
    cls = REGISTRY.spec(key).response_type(version)
    return decode_body(cls, body_bytes(build(cls, {"throttle_time": 0, **body})), 0)


def _versions(key: int, lo: int) -> list[int]:
    return list(range(max(lo, REGISTRY.spec(key).min_version), REGISTRY.spec(key).max_version + 1))


@pytest.mark.parametrize("version", _versions(wire.VOTE, 0))
def test_vote(version: int) -> None:
    req = m.VoteRequest(3, 7, 6, 120, pre_vote=version >= 2, voter_id=1 if version >= 1 else -1)
    req = m.VoteRequest(
        req.replica_id, req.replica_epoch, req.last_offset_epoch, req.last_offset,
        pre_vote=req.pre_vote, voter_id=req.voter_id, cluster_id="c1",
    )  # fmt: skip
    assert (
        wire.parse_vote_request(_through_request(wire.VOTE, version, wire.vote_request_body(req)))
        == req
    )
    for resp in (m.VoteResponse(0, 2, 7, True), m.VoteResponse(74, -1, 9, False)):
        got = wire.parse_vote_response(
            _through_response(wire.VOTE, version, wire.vote_response_body(resp))
        )
        assert got == resp


@pytest.mark.parametrize("version", _versions(wire.BEGIN_QUORUM_EPOCH, 0))
def test_begin_quorum_epoch(version: int) -> None:
    req = m.BeginQuorumEpochRequest(2, 11, voter_id=3 if version >= 1 else -1, cluster_id="c1")
    body = _through_request(wire.BEGIN_QUORUM_EPOCH, version, wire.begin_request_body(req))
    assert wire.parse_begin_request(body) == req
    resp = m.BeginQuorumEpochResponse(0, 2, 11)
    got = _through_response(wire.BEGIN_QUORUM_EPOCH, version, wire.epoch_response_body(resp))
    assert wire.parse_begin_response(got) == resp


@pytest.mark.parametrize("version", _versions(wire.END_QUORUM_EPOCH, 0))
def test_end_quorum_epoch(version: int) -> None:
    req = m.EndQuorumEpochRequest(2, 11, (3, 1), cluster_id="c1")
    body = _through_request(wire.END_QUORUM_EPOCH, version, wire.end_request_body(req))
    assert wire.parse_end_request(body) == req
    resp = m.EndQuorumEpochResponse(6, 3, 12)
    got = _through_response(wire.END_QUORUM_EPOCH, version, wire.epoch_response_body(resp))
    assert wire.parse_end_response(got) == resp


@pytest.mark.parametrize("version", _versions(wire.FETCH, 13))
def test_fetch(version: int) -> None:
    req = m.FetchRequest(3, 5, 40, 4, max_wait_ms=500, cluster_id="c1" if version >= 12 else None)
    body = _through_request(wire.FETCH, version, wire.fetch_request_body(req))
    assert wire.is_metadata_fetch(body)
    got_req = wire.parse_fetch_request(body)
    assert got_req == m.FetchRequest(
        3, 5, 40, 4, max_wait_ms=500, max_entries=req.max_entries, cluster_id=req.cluster_id
    )
    entries = (
        m.LogEntry(40, 5, b"leader change", True),
        m.LogEntry(41, 5, b"r1"),
        m.LogEntry(42, 5, b"r2"),
    )
    cases: list[m.FetchResponse] = [
        m.FetchResponse(0, m.LeaderIdAndEpoch(1, 5), 41, 0, entries),
        m.FetchResponse(
            0, m.LeaderIdAndEpoch(1, 5), 41, 0, diverging_epoch=m.EpochEndOffset(4, 38)
        ),
        m.FetchResponse(0, m.LeaderIdAndEpoch(1, 5), 41, 30, snapshot_id=m.SnapshotId(35, 4)),
        m.FetchResponse(74, m.LeaderIdAndEpoch(2, 6), -1, -1),
    ]
    for resp in cases:
        raw = _through_response(wire.FETCH, version, wire.fetch_response_body(resp, 0))
        assert wire.parse_fetch_response(raw) == resp


def test_a_consumer_fetch_is_not_a_metadata_fetch() -> None:
    import uuid

    body = _through_request(
        wire.FETCH,
        16,
        {
            "max_wait": 0,
            "topics": [
                {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "fetch_offset": 0}]}
            ],
        },
    )
    assert not wire.is_metadata_fetch(body)
    with pytest.raises(wire.NotMetadataPartition):
        wire.parse_fetch_request(body)


@pytest.mark.parametrize("version", _versions(wire.FETCH_SNAPSHOT, 0))
def test_fetch_snapshot(version: int) -> None:
    req = m.FetchSnapshotRequest(3, 5, m.SnapshotId(35, 4), 1024, 65536, cluster_id="c1")
    body = _through_request(wire.FETCH_SNAPSHOT, version, wire.fetch_snapshot_request_body(req))
    assert wire.parse_fetch_snapshot_request(body) == req
    cases = [
        m.FetchSnapshotResponse(
            0, m.LeaderIdAndEpoch(1, 5), m.SnapshotId(35, 4), 9000, 1024, b"x" * 100
        ),
        m.FetchSnapshotResponse(98, m.LeaderIdAndEpoch(1, 5)),
    ]
    for resp in cases:
        got = _through_response(
            wire.FETCH_SNAPSHOT, version, wire.fetch_snapshot_response_body(resp)
        )
        assert wire.parse_fetch_snapshot_response(got) == resp


@pytest.mark.parametrize(
    ("key", "parse", "body"),
    [
        (
            wire.VOTE,
            wire.parse_vote_request,
            {"topics": [{"topic_name": "other", "partitions": [{}]}]},
        ),
        (
            wire.BEGIN_QUORUM_EPOCH,
            wire.parse_begin_request,
            {
                "topics": [
                    {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]}
                ]
            },
        ),
        (wire.END_QUORUM_EPOCH, wire.parse_end_request, {"topics": []}),
    ],
)
def test_other_partitions_are_refused(
    key: int, parse: Callable[[Any], Any], body: dict[str, Any]
) -> None:
    with pytest.raises(wire.NotMetadataPartition):
        parse(_through_request(key, REGISTRY.spec(key).max_version, body))


@pytest.mark.parametrize("version", [4, 8, 9, 11])
def test_an_old_fetch_of_the_metadata_log_parses(version: int) -> None:
    """Fetch v4-v11 lacks current_leader_epoch (before v9) and last_fetched_epoch (before
    v12): read as -1, not an AttributeError closing the connection."""
    body = _through_request(
        wire.FETCH,
        version,
        {
            "replica_id": 7,
            "max_wait": 100,
            "topics": [
                {
                    "topic": "__cluster_metadata",
                    "partitions": [{"partition": 0, "fetch_offset": 12}],
                }
            ],
        },
    )
    req = wire.parse_fetch_request(body)
    assert (req.replica_id, req.fetch_offset, req.last_fetched_epoch) == (7, 12, -1)
    if version < 9:
        assert req.current_leader_epoch == -1
