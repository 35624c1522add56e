"""The mirror fetcher's zero-copy Fetch response parser against the encoder FetchApi uses."""

import uuid
from typing import Any

import pytest

from protocol.encoders.fetch import encode_fetch_rows
from protocol.errors import ProtocolError
from protocol.fetch_codec import (
    FetchPartitionRequest,
    encode_fetch_request,
    parse_fetch_response,
)
from protocol.records import Record, build_batch
from protocol.registry import REGISTRY, decode_body

TID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _response(version: int, records: bytes) -> memoryview:
    """What FetchApi sends (its rows encoder) for two partitions."""
    topics: list[dict[str, Any]] = [
        {
            "topic_id": TID,
            "topic": "t",
            "partitions": [
                {
                    "partition_index": 3,
                    "error_code": 0,
                    "high_watermark": 10,
                    "last_stable_offset": 9,
                    "log_start_offset": 2,
                    "aborted_transactions": [{"producer_id": 5, "first_offset": 1}],
                    "preferred_read_replica": -1,
                    "records": records,
                    "diverging_epoch": {"epoch": 4, "end_offset": 8},
                    **({"mirror_leader_epoch": 12} if version >= 19 else {}),
                },
                {
                    "partition_index": 4,
                    "error_code": 1,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": None,
                },
            ],
        }
    ]
    return memoryview(b"".join(bytes(b) for b in encode_fetch_rows(0, 0, 77, topics, version)))


@pytest.mark.parametrize("version", [4, 5, 7, 10, 11, 12, 13, 16, 17, 19])
def test_parse_matches_encoder(version: int) -> None:
    batch = bytes(build_batch([Record(value=b"v%d" % i) for i in range(3)], base_offset=5))
    parsed = parse_fetch_response(_response(version, batch), version)
    assert parsed.session_id == (77 if version >= 7 else 0)
    assert len(parsed.partitions) == 2
    key, p = parsed.partitions[0]
    assert key == (TID if version >= 13 else "t")
    assert (p.partition, p.error_code, p.high_watermark, p.last_stable_offset) == (3, 0, 10, 9)
    assert p.log_start_offset == (2 if version >= 5 else -1)
    assert bytes(p.records) == batch
    assert isinstance(p.records, memoryview)
    if version >= 12:
        assert (p.diverging_epoch, p.diverging_end_offset) == (4, 8)
    assert p.mirror_leader_epoch == (12 if version >= 19 else -1)
    _, q = parsed.partitions[1]
    assert q.error_code == 1 and len(q.records) == 0


@pytest.mark.parametrize("version", [4, 12, 13, 19])
def test_truncated_response_raises(version: int) -> None:
    full = _response(version, bytes(build_batch([Record(value=b"x")], base_offset=0)))
    for cut in (3, len(full) // 2, len(full) - 1):
        with pytest.raises(ProtocolError):
            parse_fetch_response(full[:cut], version)


@pytest.mark.parametrize("version", [4, 7, 12, 13, 15, 19])
def test_request_round_trips(version: int) -> None:
    body = encode_fetch_request(
        version,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1000,
        session_id=9,
        session_epoch=2,
        partitions=[FetchPartitionRequest("t", TID, 1, 42, 3, 2, -1, 100, 11)],
        forgotten=[("t", TID, 0)],
        by_topic_id=version >= 13,
    )
    req = decode_body(REGISTRY.spec(1).request_type(version), body, 0)
    assert req.isolation_level == 1
    (topic,) = req.topics
    assert (topic.topic_id if version >= 13 else topic.topic) == (TID if version >= 13 else "t")
    (p,) = topic.partitions
    assert (p.partition, p.fetch_offset, p.partition_max_bytes) == (1, 42, 100)
    if version >= 19:
        assert p.mirror_leader_epoch == 11  # KIP-1279's tag 2
    if version >= 7:
        assert (req.session_id, req.session_epoch) == (9, 2)
        assert [list(f.partitions) for f in req.forgotten_topics_data] == [[0]]
    if version >= 15:
        assert req.replica_state.replica_id == -1
    else:
        assert req.replica_id == -1
