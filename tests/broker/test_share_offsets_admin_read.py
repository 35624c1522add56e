"""DescribeShareGroupOffsets while the share coordinator cannot answer (moving, loading): each
partition gets the coordinator's error within the admin read's short retry budget, all
partitions at once, instead of ten seconds per partition one after the other."""

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

from kio.schema.errors import ErrorCode

from broker.api.context import RequestContext
from broker.api.services import Services
from broker.api.share_offsets import ADMIN_READ_RETRY_MS, ShareOffsetsApi
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.share.persister import SharePersister
from broker.coordinator.share.state_coordinator import ShareStateCoordinator
from broker.coordinator.timer import ManualScheduler
from protocol.build import build
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY
from tests.broker.group_support import async_test

PARTITIONS = 20


@dataclass
class Topic:
    topic_id: uuid.UUID
    partitions: dict[int, Any]


@dataclass
class Image:
    topics: dict[str, Topic] = field(default_factory=dict)


@dataclass
class FakeServices:
    img: Image
    authorizer: None = None

    def image(self) -> Image:
        return self.img


class ShareGroups:
    async def share_group_topics(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        return ErrorCode.none, {"t"}


async def _topic_exists() -> bool:
    return True


@async_test
async def test_an_unavailable_coordinator_answers_within_the_admin_budget() -> None:
    parts = {p: object() for p in range(PARTITIONS)}
    services = cast(Services, FakeServices(Image({"t": Topic(uuid.uuid4(), parts)})))
    unloaded = ShareStateCoordinator(1, ManualScheduler())  # this node's shard never loads
    persister = SharePersister(unloaded, lambda p: 1, 1, None, _topic_exists)  # type: ignore[arg-type]
    api = ShareOffsetsApi(services, cast(GroupCoordinator, ShareGroups()), persister)
    header = RequestHeader(
        api_key=90, api_version=0, correlation_id=1, client_id="t", header_version=2
    )
    ctx = RequestContext(header=header, connection_id="c", listener="PLAINTEXT", peer_host="h")
    req = build(
        REGISTRY.spec(90).request_type(0),
        {"groups": [{"group_id": "g", "topics": [{"topic_name": "t", "partitions": list(parts)}]}]},
    )
    started = time.monotonic()
    resp = await asyncio.wait_for(api.handle_describe(ctx, req), 15)
    took = time.monotonic() - started
    [group] = resp.groups
    [topic] = group.topics
    assert len(topic.partitions) == PARTITIONS
    assert {p.error_code for p in topic.partitions} == {ErrorCode.not_coordinator}
    assert took < ADMIN_READ_RETRY_MS / 1000 + 3, took
