"""Admin writes on a controller listener of a node that is not the active controller: the
handler runs (it authorizes first, as Kafka's ControllerApis do), the controller refuses at once
with `NotLeaderError`, and the answer is NOT_CONTROLLER for everything asked (Kafka's
QuorumController), never a wait on a quorum the node does not lead; the active controller runs
the handler, and answers REQUEST_TIMED_OUT when it cannot complete within the request's
timeout."""

import asyncio
import contextlib
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.context import RequestContext
from broker.api.dispatcher import Api, Dispatcher
from broker.quorum.driver import NotLeaderError
from protocol.build import build
from protocol.registry import REGISTRY
from tests.broker.group_support import async_test

DELETE_TOPICS, CREATE_PARTITIONS, LIST_REASSIGNMENTS = 20, 37, 46


class Handlers:
    def __init__(self, active: bool) -> None:
        self.ran: list[int] = []
        self.active = active

    def api(self, key: int) -> Api:
        async def handler(ctx: RequestContext, req: Any) -> Any:
            self.ran.append(key)
            if not self.active:  # the controller of a node that does not lead the quorum
                raise NotLeaderError(2, 7)
            await asyncio.sleep(3600)  # a quorum write that never commits here

        return Api(key, handler)


def _dispatcher(active: bool) -> tuple[Dispatcher, Handlers]:
    h = Handlers(active)
    apis = [h.api(k) for k in (DELETE_TOPICS, CREATE_PARTITIONS, LIST_REASSIGNMENTS)]
    d = Dispatcher(apis, controller_listeners=["CONTROLLER"])
    return d, h


async def _call(d: Dispatcher, key: int, version: int, body: dict[str, Any]) -> Any:
    request = build(REGISTRY.spec(key).request_type(version), body)
    frame = REGISTRY.encode_request(version, 9, "admin", request)[4:]

    def ctx(header: Any) -> RequestContext:
        return RequestContext(header, "c1", "CONTROLLER", "127.0.0.1")

    parts = await asyncio.wait_for(d.handle(ctx, memoryview(frame)), 1.0)
    assert parts is not None
    corr, resp = REGISTRY.decode_response(key, version, b"".join(bytes(p) for p in parts))
    assert corr == 9
    return resp


@async_test
async def test_writes_on_an_inactive_controller_are_not_controller() -> None:
    d, h = _dispatcher(active=False)
    resp = await _call(d, DELETE_TOPICS, 6, {"topics": [{"name": "a"}, {"name": "b"}]})
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("a", ErrorCode.not_controller),
        ("b", ErrorCode.not_controller),
    ]
    resp = await _call(d, DELETE_TOPICS, 1, {"topic_names": ["a"], "timeout": 1000})
    assert [r.error_code for r in resp.responses] == [ErrorCode.not_controller]
    resp = await _call(d, CREATE_PARTITIONS, 0, {"topics": [{"name": "a", "count": 3}]})
    assert [(r.name, r.error_code) for r in resp.results] == [("a", ErrorCode.not_controller)]
    assert h.ran == [DELETE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS]


@async_test
async def test_the_active_controller_runs_the_handler() -> None:
    d, h = _dispatcher(active=True)
    with contextlib.suppress(TimeoutError):
        await _call(d, DELETE_TOPICS, 6, {"topics": [{"name": "a"}]})
    assert h.ran == [DELETE_TOPICS]


@async_test
async def test_reads_are_served_by_any_controller() -> None:
    d, h = _dispatcher(active=False)
    with contextlib.suppress(TimeoutError):
        await _call(d, LIST_REASSIGNMENTS, 0, {"topics": None})
    assert h.ran == [LIST_REASSIGNMENTS]


@async_test
async def test_a_write_that_cannot_complete_answers_request_timed_out_in_its_timeout() -> None:
    d, h = _dispatcher(active=True)
    started = asyncio.get_running_loop().time()
    resp = await _call(d, DELETE_TOPICS, 6, {"topics": [{"name": "a"}], "timeout": 200})
    assert [(r.name, r.error_code) for r in resp.responses] == [("a", ErrorCode.request_timed_out)]
    assert asyncio.get_running_loop().time() - started < 0.9
    resp = await _call(
        d, CREATE_PARTITIONS, 1, {"topics": [{"name": "b", "count": 2}], "timeout": 100}
    )
    assert [(r.name, r.error_code) for r in resp.results] == [("b", ErrorCode.request_timed_out)]
    assert h.ran == [DELETE_TOPICS, CREATE_PARTITIONS]


@async_test
async def test_a_forwarded_write_answers_within_its_timeout_too() -> None:
    """The same bound for a request that came inside an Envelope from another broker."""
    d, _h = _dispatcher(active=True)
    request = build(
        REGISTRY.spec(DELETE_TOPICS).request_type(6), {"topics": [{"name": "a"}], "timeout": 150}
    )
    frame = REGISTRY.encode_request(6, 4, "admin", request)[4:]

    def ctx(header: Any) -> RequestContext:
        return RequestContext(header, "c1", "CONTROLLER", "127.0.0.1")

    raw, errors = await asyncio.wait_for(d.handle_embedded(ctx, memoryview(frame)), 1.0)
    corr, resp = REGISTRY.decode_response(DELETE_TOPICS, 6, raw)
    assert corr == 4
    assert [r.error_code for r in resp.responses] == [ErrorCode.request_timed_out]
    assert errors == {ErrorCode.request_timed_out: 1}
