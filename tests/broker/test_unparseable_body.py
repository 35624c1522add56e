"""A request body that does not parse closes its connection unanswered (Kafka's socket
server), with one WARN line naming the listener, the client, the api key and version."""

import logging
import struct
from typing import Any

import pytest

from broker.api.context import RequestContext
from broker.api.dispatcher import Api, Dispatcher
from tests.broker.group_support import async_test


class Connection:
    def __init__(self) -> None:
        self.closed: list[bool] = []

    def close(self, *, fatal: bool = False) -> None:
        self.closed.append(fatal)


@pytest.fixture
def caplog_warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="broker.api.dispatcher")
    return caplog


def test_garbage_body_closes_with_one_warning(caplog_warnings: pytest.LogCaptureFixture) -> None:
    ran: list[Any] = []

    async def handler(ctx: RequestContext, req: Any) -> Any:
        ran.append(req)

    conn = Connection()
    d = Dispatcher([Api(60, handler)])  # DescribeCluster

    @async_test
    async def body() -> None:
        cid = b"fuzzer"
        # header v2 (flexible), then a compact string length far past the frame end
        frame = struct.pack(">hhih", 60, 0, 5, len(cid)) + cid + b"\x00" + b"\xff\xff\xff\x0f"

        def ctx(header: Any) -> RequestContext:
            return RequestContext(header, "c1", "CLIENT", "127.0.0.1", connection=conn)

        assert await d.handle(ctx, memoryview(frame)) is None

    body()
    assert conn.closed == [True] and ran == []
    records = [r for r in caplog_warnings.records if r.name == "broker.api.dispatcher"]
    assert [r.levelname for r in records] == ["WARNING"], records
    message = records[0].getMessage()
    for part in ("listener CLIENT", "client 'fuzzer'", "api key 60 v0", "does not parse"):
        assert part in message, message
