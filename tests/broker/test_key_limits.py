"""Coordinator keys no Kafka record can hold (over 32,767 bytes, or a mirror name over 249
characters) are answered with the API's error before the handler runs: they were written into
records with an int16 length (a crash closing the connection) or hashed once per partition."""

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.api.context import RequestContext
from broker.api.dispatcher import Api, Dispatcher
from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY
from tests.broker.group_support import async_test

HUGE = "g" * 70_000
OFFSET_COMMIT, JOIN_GROUP, INIT_PRODUCER_ID, WRITE_MIRROR_STATES = 8, 11, 22, 101
CONSUMER_GROUP_HEARTBEAT = 68


class Handlers:
    def __init__(self) -> None:
        self.ran: list[int] = []

    def api(self, key: int) -> Api:
        async def handler(ctx: RequestContext, req: Any) -> Any:
            self.ran.append(key)
            raise AssertionError("the handler must not see this request")

        return Api(key, handler)


async def _call(d: Dispatcher, key: int, version: int, body: dict[str, Any]) -> Any:
    request = build(REGISTRY.spec(key).request_type(version), body)
    frame = REGISTRY.encode_request(version, 3, "c", request)[4:]

    def ctx(header: Any) -> RequestContext:
        return RequestContext(header, "c1", "PLAINTEXT", "127.0.0.1")

    parts = await asyncio.wait_for(d.handle(ctx, memoryview(frame)), 5)
    assert parts is not None
    spec = REGISTRY.spec(key)
    raw = b"".join(bytes(p) for p in parts)[4 + (spec.response_header_version(version) == 1) :]
    resp, used = entity_reader(spec.response_type(version))(raw, 0)  # kio's native reader
    assert used == len(raw)
    return resp


@async_test
async def test_oversized_coordinator_keys_get_the_apis_error() -> None:
    h = Handlers()
    keys = (
        OFFSET_COMMIT,
        JOIN_GROUP,
        INIT_PRODUCER_ID,
        WRITE_MIRROR_STATES,
        CONSUMER_GROUP_HEARTBEAT,
    )
    d = Dispatcher([h.api(k) for k in keys])
    commit = {
        "group_id": HUGE,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
    }
    resp = await _call(d, OFFSET_COMMIT, 9, commit)
    assert [p.error_code for t in resp.topics for p in t.partitions] == [ErrorCode.invalid_group_id]
    join = {
        "group_id": HUGE,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    assert (await _call(d, JOIN_GROUP, 9, join)).error_code == ErrorCode.invalid_group_id
    for member in ({"member_id": HUGE}, {"group_instance_id": HUGE}):
        join = {**join, "group_id": "g", "member_id": "", **member}
        assert (await _call(d, JOIN_GROUP, 9, join)).error_code == ErrorCode.invalid_request
    heartbeat = {"group_id": "g", "member_id": HUGE, "member_epoch": 0, "rebalance_timeout": 1000}
    resp = await _call(d, CONSUMER_GROUP_HEARTBEAT, 1, {**heartbeat, "subscribed_topic_names": []})
    assert resp.error_code == ErrorCode.invalid_request
    init = {"transactional_id": HUGE, "transaction_timeout_ms": 60_000}
    assert (await _call(d, INIT_PRODUCER_ID, 5, init)).error_code == ErrorCode.invalid_request
    states = {
        "mirror_name": "m" * 250,
        "topics": [{"topic_id": None, "partitions": [{"partition_index": i} for i in range(1000)]}],
    }
    resp = await _call(d, WRITE_MIRROR_STATES, 0, states)
    assert resp.error_code == MirrorErrorCode.INVALID_MIRROR_NAME
    assert h.ran == []
