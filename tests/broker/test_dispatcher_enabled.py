"""An API served only while a switch says so (share groups: group.share.enable or share.version
1): neither advertised nor answered while off, both as soon as it is on."""

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from broker.api.dispatcher import Api, Dispatcher
from protocol.build import build
from protocol.errors import RequestError
from protocol.registry import REGISTRY

SHARE_GROUP_DESCRIBE = 77


def _frame(key: int, version: int) -> memoryview:
    body: Any = REGISTRY.spec(key).request_type(version)(
        group_ids=("g",), include_authorized_operations=False
    )
    return memoryview(REGISTRY.encode_request(version, 7, "t", body)[4:])


def test_a_switched_off_api_is_neither_advertised_nor_served() -> None:
    on = [False]
    answered: list[Any] = []

    async def handler(ctx: Any, req: Any) -> Any:
        answered.append(req)
        cls = REGISTRY.spec(SHARE_GROUP_DESCRIBE).response_type(1)
        return build(cls, {"throttle_time": 0, "groups": []})

    d = Dispatcher(
        [Api(SHARE_GROUP_DESCRIBE, handler, min_version=1, max_version=1, enabled=lambda: on[0])]
    )
    ctx = lambda header: SimpleNamespace(api_version=header.api_version, listener="PLAINTEXT")  # noqa: E731
    assert SHARE_GROUP_DESCRIBE not in d.supported_versions()
    with pytest.raises(RequestError):
        asyncio.run(d.handle(ctx, _frame(SHARE_GROUP_DESCRIBE, 1)))
    assert answered == []
    on[0] = True
    assert d.supported_versions()[SHARE_GROUP_DESCRIBE] == (1, 1)
    assert asyncio.run(d.handle(ctx, _frame(SHARE_GROUP_DESCRIBE, 1))) is not None
    assert len(answered) == 1
