"""Metadata by topic id: before v12 (no null name) Kafka refuses the request as invalid; from
v12 an unknown id is UNKNOWN_TOPIC_ID with a null name. Each answer goes through the node's own
encoder and back through kio's native reader."""

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.api.context import RequestContext
from broker.api.metadata import MetadataApi
from broker.api.services import Services
from protocol.build import build
from protocol.encoders.metadata import encode_metadata_response
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY


@dataclass
class Image:
    topics: dict[str, Any] = field(default_factory=dict)
    brokers: dict[int, Any] = field(default_factory=dict)

    def topic_by_id(self, topic_id: uuid.UUID) -> None:
        return None


@dataclass
class FakeServices:
    img: Image = field(default_factory=Image)
    authorizer: None = None
    auto_create_topics: bool = False
    node_id: int = 1
    cluster_id: str = "c"

    def image(self) -> Image:
        return self.img


def answer(version: int, topics: list[dict[str, Any]]) -> Any:
    api = MetadataApi(cast(Services, FakeServices()))
    header = RequestHeader(
        api_key=3, api_version=version, correlation_id=1, client_id="t", header_version=2
    )
    ctx = RequestContext(header=header, connection_id="c", listener="PLAINTEXT", peer_host="h")
    req = build(REGISTRY.spec(3).request_type(version), {"topics": topics})
    resp = asyncio.run(api.handle(ctx, req))
    raw = encode_metadata_response(resp, version)
    decoded, used = entity_reader(REGISTRY.spec(3).response_type(version))(raw, 0)
    assert used == len(raw)
    return decoded


def test_v10_v11_by_topic_id_is_an_invalid_request() -> None:
    unknown = uuid.uuid4()
    for version in (10, 11):
        resp = answer(version, [{"topic_id": unknown, "name": None}])
        [t] = resp.topics
        assert (t.error_code, t.name, t.topic_id) == (ErrorCode.invalid_request, "", unknown)
        # a name with an id: still not these versions' request
        resp = answer(version, [{"topic_id": unknown, "name": "a"}])
        assert [(t.error_code, t.name) for t in resp.topics] == [(ErrorCode.invalid_request, "a")]


def test_v10_by_name_is_served() -> None:
    resp = answer(10, [{"topic_id": None, "name": "nope"}])
    [t] = resp.topics
    assert (t.error_code, t.name) == (ErrorCode.unknown_topic_or_partition, "nope")


def test_v12_unknown_topic_id_has_a_null_name() -> None:
    unknown = uuid.uuid4()
    for version in (12, 13):
        [t] = answer(version, [{"topic_id": unknown, "name": None}]).topics
        assert (t.error_code, t.name, t.topic_id) == (ErrorCode.unknown_topic_id, None, unknown)
