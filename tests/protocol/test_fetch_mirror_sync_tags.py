"""Synchronous mirroring's Fetch v19 tags (1279, docs/protocol.md): the hand encoder writes what
the schema types and the hand parser read back, only from v19, and a reader that does not know
the tags (Kafka v18 and older, any broker) skips them."""

import uuid

import pytest

from protocol.encoders.fetch_request import parse_fetch_request
from protocol.fetch_codec import FetchPartitionRequest, encode_fetch_request
from protocol.readers import skip_tagged_fields
from protocol.registry import REGISTRY, decode_body

TID = uuid.UUID("6b1f8a53-6a4c-4d58-9a3e-6f0a6c3d2b11")


def _encode(version: int, sync_id: str | None, committed: int, epoch: int = -1) -> bytes:
    parts = [
        FetchPartitionRequest("orders", TID, 0, 120, 3, 2, -1, 1 << 20, epoch, committed),
        FetchPartitionRequest("orders", TID, 1, 7, 3, 2, -1, 1 << 20),  # reports nothing
    ]
    return encode_fetch_request(
        version,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 24,
        session_id=0,
        session_epoch=0,
        partitions=parts,
        forgotten=[],
        by_topic_id=version >= 13,
        replica_id=-1 if epoch < 0 else 4,
        replica_epoch=-1 if epoch < 0 else 9,
        mirror_sync_id=sync_id,
    )


@pytest.mark.parametrize("epoch", [-1, 5])
def test_v19_carries_the_mirror_and_its_commits(epoch: int) -> None:
    raw = _encode(19, "cluster-b/dr", 118, epoch)
    got = parse_fetch_request(raw, 0, 19)
    assert got.mirror_sync_id == "cluster-b/dr"
    p0, p1 = got.topics[0].partitions
    assert (p0.mirror_committed_offset, p0.mirror_leader_epoch) == (118, epoch)
    assert p1.mirror_committed_offset == -1
    body = decode_body(REGISTRY.spec(1).request_type(19), raw, 0)
    assert body.mirror_sync_id == "cluster-b/dr"
    assert [p.mirror_committed_offset for p in body.topics[0].partitions] == [118, -1]
    assert body.topics[0].partitions[0].mirror_leader_epoch == epoch
    if epoch >= 0:
        assert body.replica_state.replica_id == 4


@pytest.mark.parametrize("version", [12, 15, 18])
def test_older_versions_never_carry_them(version: int) -> None:
    assert _encode(version, "cluster-b/dr", 118) == _encode(version, None, -1)


def test_without_a_sync_id_nothing_is_sent() -> None:
    assert _encode(19, None, 118) == _encode(19, None, -1)
    got = parse_fetch_request(_encode(19, None, 118), 0, 19)
    assert got.mirror_sync_id is None
    assert got.topics[0].partitions[0].mirror_committed_offset == -1


def test_a_reader_that_does_not_know_tag_1279_skips_it() -> None:
    """Read as a broker without the extension would: the request's tagged fields are one
    unknown tag it steps over, ending exactly at the end of the body."""
    with_tags = _encode(19, "cluster-b/dr", 118)
    plain = _encode(19, None, -1)
    # the partition tags: first partition's section grew by tag 1279 (2+1+8 bytes), the
    # top-level section by tag 1279 with the string
    assert len(with_tags) - len(plain) == (2 + 1 + 8) + (2 + 1 + 1 + len("cluster-b/dr"))
    top = with_tags.rfind(b"\x01\xff\x09")  # count 1, tag 1279
    assert skip_tagged_fields(memoryview(with_tags), top, "request tags") == len(with_tags)
