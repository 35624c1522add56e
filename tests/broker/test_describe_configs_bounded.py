"""DescribeConfigs of 1,000 resources: a resource asked for again shares the first result
(one describe call, not a thousand), the loop yields between resources, and counting the
answer's error codes does not walk the same entries again."""

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, cast

from kio.schema.errors import ErrorCode

from broker.api.configs import ConfigsApi
from broker.api.context import RequestContext
from broker.api.error_counts import error_counts
from broker.api.services import Services
from protocol.build import build
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY
from tests.broker.group_support import async_test

BROKER = 4
CONFIGS = 300


@dataclass
class FakeServices:
    node_id: int = 1
    authorizer: None = None
    calls: list[int] = field(default_factory=list)

    def describe_broker_configs(self) -> list[dict[str, Any]]:
        self.calls.append(1)
        return [
            {"name": f"c{i}", "value": "v", "read_only": True, "source": 5, "sensitive": False}
            for i in range(CONFIGS)
        ]


@async_test
async def test_a_thousand_resources_are_described_once_each_and_yield() -> None:
    s = FakeServices()
    api = ConfigsApi(cast(Services, s))
    header = RequestHeader(
        api_key=32, api_version=4, correlation_id=1, client_id="t", header_version=2
    )
    ctx = RequestContext(header=header, connection_id="c", listener="PLAINTEXT", peer_host="h")
    one = {"resource_type": BROKER, "resource_name": "1", "configuration_keys": None}
    resources = [one for _ in range(1000)]
    resources += [{**one, "resource_name": ""}]
    req = build(REGISTRY.spec(32).request_type(4), {"resources": resources})
    ticks = 0

    async def other() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    resp = await api.describe_configs(ctx, req)
    task.cancel()
    assert len(resp.results) == 1001
    assert [len(r.configs) for r in resp.results] == [CONFIGS] * 1001, resp.results[0]
    assert len(s.calls) == 2  # "1" and "" are different resources
    assert ticks >= 2  # other tasks ran while the request was served
    started = time.perf_counter()
    counts = error_counts(resp)
    assert counts == {ErrorCode.none: 1001}
    assert time.perf_counter() - started < 1.0
