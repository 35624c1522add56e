"""The share-state RPCs (83-87) with keys no share-partition has: the zero topic id is
UNKNOWN_TOPIC_OR_PARTITION, a negative partition and a group id longer than a state record
can hold are INVALID_REQUEST; every answer encodes and decodes (kio's reader), no crash."""

import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.api.context import RequestContext
from broker.api.dispatcher import Dispatcher
from broker.api.share_state import ShareStateApi
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.share.state_coordinator import ShareStateCoordinator
from broker.coordinator.timer import ManualScheduler
from protocol.build import build
from protocol.registry import REGISTRY
from tests.broker.group_support import async_test

ZERO = uuid.UUID(int=0)
T1 = uuid.UUID(int=7)
PARTITION = {
    83: {"partition": 0, "state_epoch": 0, "start_offset": 0},
    84: {"partition": 0, "leader_epoch": 0},
    85: {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0},
    86: {"partition": 0},
    87: {"partition": 0, "leader_epoch": 0},
}


async def _dispatcher() -> Dispatcher:
    c = ShareStateCoordinator(1, ManualScheduler())
    await c.load(0, InMemoryRecordLog())
    return Dispatcher(ShareStateApi(c).apis())


async def _errors(d: Dispatcher, key: int, group: str, topic_id: uuid.UUID, part: int) -> Any:
    body = {
        "group_id": group,
        "topics": [{"topic_id": topic_id, "partitions": [PARTITION[key] | {"partition": part}]}],
    }
    request = build(REGISTRY.spec(key).request_type(0), body)
    frame = REGISTRY.encode_request(0, 1, "t", request)[4:]

    def ctx(header: Any) -> RequestContext:
        return RequestContext(header, "c1", "PLAINTEXT", "127.0.0.1")

    parts = await d.handle(ctx, memoryview(frame))
    assert parts is not None, f"key {key}: no answer"
    raw = b"".join(bytes(p) for p in parts)[5:]  # response header v1: correlation id, tags
    resp, used = entity_reader(REGISTRY.spec(key).response_type(0))(raw, 0)
    assert used == len(raw)
    return [p.error_code for r in resp.results for p in r.partitions]


@async_test
async def test_zero_topic_id_is_unknown_topic() -> None:
    d = await _dispatcher()
    for key in PARTITION:
        assert await _errors(d, key, "g", ZERO, 0) == [ErrorCode.unknown_topic_or_partition], key


@async_test
async def test_negative_partition_and_huge_group_are_invalid_requests() -> None:
    d = await _dispatcher()
    for key in PARTITION:
        assert await _errors(d, key, "g", T1, -1) == [ErrorCode.invalid_request], key
        huge = "é" * 35_000  # 70,000 bytes: a flexible request carries it, a record key cannot
        assert await _errors(d, key, huge, T1, 0) == [ErrorCode.invalid_request], key
    # a proper key still works
    assert await _errors(d, 83, "g", T1, 0) == [ErrorCode.none]
