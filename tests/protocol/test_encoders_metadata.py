"""The hand-written Metadata response encoder against kio's generic writer."""

import datetime
import importlib
import io
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from protocol.encoders.metadata import encode_metadata_response

from .strategies import entities

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def module(version: int) -> Any:
    return importlib.import_module(f"kio.schema.metadata.v{version}.response")


def kio_bytes(obj: Any, version: int) -> bytes:
    buf = io.BytesIO()
    entity_writer(module(version).MetadataResponse)(buf, obj)
    return buf.getvalue()


@pytest.mark.parametrize("version", range(14))
def test_matches_kio_writer(version: int) -> None:
    @SETTINGS
    @given(entities(module(version).MetadataResponse))
    def check(resp: Any) -> None:
        assert encode_metadata_response(resp, version) == kio_bytes(resp, version)

    check()


def big_partition_response(version: int, replicas: int) -> Any:
    """One topic whose partitions have long replica lists (multi-byte compact lengths)."""
    m = module(version)
    nodes = tuple(range(replicas))
    extra: dict[str, Any] = {}
    if version >= 5:
        extra["offline_replicas"] = nodes[:3]
    partition = m.MetadataResponsePartition(
        error_code=ErrorCode.none,
        partition_index=1,
        leader_id=0,
        replica_nodes=nodes,
        isr_nodes=nodes[: replicas // 2],
        **extra,
    )
    topic_kw: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "name": "wide",
        "partitions": (partition,),
    }
    if version >= 10:
        topic_kw["topic_id"] = uuid.UUID(int=99)
    top: dict[str, Any] = {"brokers": (), "topics": (m.MetadataResponseTopic(**topic_kw),)}
    if version >= 3:
        top["throttle_time"] = datetime.timedelta(0)
    if version >= 13:
        top["error_code"] = ErrorCode.none
    return m.MetadataResponse(**top)


@pytest.mark.parametrize("version", [0, 5, 7, 9, 12, 13])
@pytest.mark.parametrize("replicas", [0, 125, 126, 127, 300])
def test_long_replica_lists(version: int, replicas: int) -> None:
    resp = big_partition_response(version, replicas)
    assert encode_metadata_response(resp, version) == kio_bytes(resp, version)


@given(st.integers(min_value=14, max_value=30) | st.integers(max_value=-1))
def test_rejects_versions_it_does_not_serve(version: int) -> None:
    with pytest.raises(ValueError, match="version"):
        encode_metadata_response(big_partition_response(13, 1), version)
