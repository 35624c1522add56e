"""The hand-written Fetch request parser agrees with the schema types for every version."""

import contextlib
import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from protocol.encoders.fetch_request import parse_fetch_request
from protocol.errors import DecodeError, ProtocolError, TruncatedError
from protocol.registry import REGISTRY

from .strategies import entities

VERSIONS = list(range(4, 20))


def _bytes(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def _ms(v: Any) -> int:
    return round(v.total_seconds() * 1000)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), version=st.sampled_from(VERSIONS), prefix=st.binary(max_size=5))
def test_agrees_with_schema_types(data: st.DataObject, version: int, prefix: bytes) -> None:
    cls = REGISTRY.spec(1).request_type(version)
    req = data.draw(entities(cls))
    raw = prefix + _bytes(req)
    got = parse_fetch_request(raw, len(prefix), version)
    assert got.max_wait_ms == _ms(req.max_wait) and got.min_bytes == req.min_bytes
    assert got.max_bytes == getattr(req, "max_bytes", 2**31 - 1)
    assert got.isolation_level == getattr(req, "isolation_level", 0)
    assert got.session_id == getattr(req, "session_id", 0)
    assert got.session_epoch == getattr(req, "session_epoch", -1)
    replica = req.replica_state.replica_id if version >= 15 else req.replica_id
    assert got.replica_id == replica
    assert got.rack_id == getattr(req, "rack_id", "")
    assert got.cluster_id == getattr(req, "cluster_id", None)
    assert got.mirror_sync_id == getattr(req, "mirror_sync_id", None)
    assert len(got.topics) == len(req.topics)
    for gt, rt in zip(got.topics, req.topics, strict=True):
        if version >= 13:
            assert gt.topic_id == rt.topic_id
        else:
            assert gt.topic == rt.topic
        for gp, rp in zip(gt.partitions, rt.partitions, strict=True):
            assert (gp.partition, gp.fetch_offset, gp.partition_max_bytes) == (
                rp.partition,
                rp.fetch_offset,
                rp.partition_max_bytes,
            )
            assert gp.current_leader_epoch == getattr(rp, "current_leader_epoch", -1)
            assert gp.last_fetched_epoch == getattr(rp, "last_fetched_epoch", -1)
            assert gp.log_start_offset == getattr(rp, "log_start_offset", -1)
            assert gp.mirror_leader_epoch == getattr(rp, "mirror_leader_epoch", -1)
            assert gp.mirror_committed_offset == getattr(rp, "mirror_committed_offset", -1)
    forgotten = getattr(req, "forgotten_topics_data", ())
    assert [list(f.partitions) for f in got.forgotten_topics_data] == [
        list(f.partitions) for f in forgotten
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_truncated_or_mutated_input_only_raises_protocol_errors(
    data: st.DataObject, version: int
) -> None:
    req = data.draw(entities(REGISTRY.spec(1).request_type(version)))
    raw = bytearray(_bytes(req))
    if raw and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(ProtocolError):
        parse_fetch_request(bytes(raw[:cut]), 0, version)


def test_forged_huge_counts_fail_fast() -> None:
    # v12 (flexible): replica_id, max_wait, min_bytes, max_bytes, isolation, session id/epoch, then topics count
    head = bytes(4 * 4 + 1 + 8)
    with pytest.raises(TruncatedError, match="topics"):
        parse_fetch_request(head + b"\xff\xff\xff\xff\x0f", 0, 12)
    with pytest.raises(TruncatedError, match="topics"):
        parse_fetch_request(head + b"\x7f\xff\xff\xff", 0, 11)
    with pytest.raises(DecodeError):
        parse_fetch_request(head + b"\xff\xff\xff\xfe", 0, 11)
