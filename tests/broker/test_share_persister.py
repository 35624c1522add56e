"""The leader's share-state persister: in process when this node is the share coordinator, over
Read/WriteShareGroupState (encoded, dispatched to the other node's handlers, decoded) when it
is another node, retrying while the coordinator loads."""

import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.context import RequestContext
from broker.api.dispatcher import Dispatcher
from broker.api.share_state import ShareStateApi
from broker.coordinator.runtime import CoordinatorError, InMemoryRecordLog
from broker.coordinator.share.persister import SharePersister
from broker.coordinator.share.state_coordinator import ShareStateCoordinator
from broker.coordinator.share.state_records import PersistedBatch, ShareKey, ShareSnapshot
from broker.coordinator.timer import ManualScheduler
from protocol.build import build
from protocol.registry import REGISTRY
from tests.broker.group_support import async_test

KEY = ShareKey("g", uuid.UUID(int=7), 3)
SNAP = ShareSnapshot(0, 4, 10, (PersistedBatch(10, 12, 2, 1), PersistedBatch(13, 19, 0, 2)))


class _OtherNode:
    """BrokerClients to one other node: requests go through that node's dispatcher."""

    def __init__(self, coordinator: ShareStateCoordinator) -> None:
        self.dispatcher = Dispatcher(ShareStateApi(coordinator).apis())
        self.calls: list[int] = []

    async def request(self, node: int, api_key: int, body: dict[str, Any], version: int) -> Any:
        self.calls.append(api_key)
        request = build(REGISTRY.spec(api_key).request_type(version), body)
        frame = REGISTRY.encode_request(version, 1, "broker-1", request)[4:]

        def ctx(header: Any) -> RequestContext:
            return RequestContext(header, "c1", "PLAINTEXT", "127.0.0.1")

        parts = await self.dispatcher.handle(ctx, memoryview(frame))
        assert parts is not None
        _corr, resp = REGISTRY.decode_response(api_key, version, b"".join(bytes(p) for p in parts))
        return resp


async def _loaded(partitions: int = 3) -> ShareStateCoordinator:
    c = ShareStateCoordinator(partitions, ManualScheduler())
    for p in range(partitions):
        await c.load(p, InMemoryRecordLog())
    return c


async def _topic_exists() -> bool:
    return True


@async_test
async def test_remote_coordinator_over_the_wire() -> None:
    remote = await _loaded()
    clients = _OtherNode(remote)
    here = ShareStateCoordinator(3, ManualScheduler())  # holds no shard: never asked
    persister = SharePersister(here, lambda p: 2, 1, clients, _topic_exists)  # type: ignore[arg-type]
    assert await persister.read(KEY) is None  # start offset -1: nothing stored
    await persister.write(KEY, SNAP)
    found = await persister.read(KEY)
    assert found is not None
    assert (found.start_offset, found.batches) == (SNAP.start_offset, SNAP.batches)
    stored = await remote.read(KEY)
    assert stored is not None and stored.leader_epoch == 4
    assert clients.calls == [84, 85, 84]
    # ReadShareGroupStateSummary: the start offset and epochs, no batches
    summary = await clients.request(
        2,
        87,
        {
            "group_id": KEY.group_id,
            "topics": [
                {"topic_id": KEY.topic_id, "partitions": [{"partition": 3, "leader_epoch": -1}]},
                {
                    "topic_id": uuid.UUID(int=99),
                    "partitions": [{"partition": 0, "leader_epoch": -1}],
                },
            ],
        },
        0,
    )
    found_part, missing = (t.partitions[0] for t in summary.results)
    assert (found_part.start_offset, found_part.leader_epoch) == (10, 4)
    assert (missing.start_offset, missing.state_epoch) == (-1, 0)


@async_test
async def test_remote_initialize_and_delete() -> None:
    """AlterShareGroupOffsets' InitializeShareGroupState and DeleteShareGroupOffsets'
    DeleteShareGroupState to the other node; an older state epoch is refused there."""
    remote = await _loaded()
    clients = _OtherNode(remote)
    here = ShareStateCoordinator(3, ManualScheduler())
    persister = SharePersister(here, lambda p: 2, 1, clients, _topic_exists)  # type: ignore[arg-type]
    await persister.write(KEY, SNAP)
    await persister.initialize(KEY, 1, 42)
    found = await persister.read(KEY)
    assert found is not None and (found.state_epoch, found.start_offset, found.batches) == (
        1,
        42,
        (),
    )
    try:
        await persister.initialize(KEY, 0, 7)
        raise AssertionError("an older state epoch was accepted")
    except CoordinatorError as exc:
        assert exc.code == ErrorCode.fenced_state_epoch
    try:  # the leader's write with the state epoch it had is fenced
        await persister.write(KEY, SNAP)
        raise AssertionError("a write of the old state epoch was accepted")
    except CoordinatorError as exc:
        assert exc.code == ErrorCode.fenced_state_epoch
    await persister.delete(KEY)
    assert await persister.read(KEY) is None
    assert clients.calls == [85, 83, 84, 83, 85, 86, 84]


@async_test
async def test_local_coordinator_and_retries_while_loading() -> None:
    here = ShareStateCoordinator(3, ManualScheduler())
    persister = SharePersister(here, lambda p: 1, 1, None, _topic_exists, retry_ms=300)  # type: ignore[arg-type]
    try:
        await persister.read(KEY)  # no shard loaded here: NOT_COORDINATOR until it gives up
        raise AssertionError("read without a loaded shard")
    except Exception as exc:  # CoordinatorError
        assert getattr(exc, "code", None) == ErrorCode.not_coordinator
    for p in range(3):
        await here.load(p, InMemoryRecordLog())
    await persister.write(KEY, SNAP)
    found = await persister.read(KEY)
    assert found is not None and found.batches == SNAP.batches


@async_test
async def test_no_state_topic_fails_at_once() -> None:
    async def cannot() -> bool:
        return False  # e.g. its replication factor is above the live brokers

    persister = SharePersister(
        ShareStateCoordinator(3, ManualScheduler()), lambda p: 1, 1, None, cannot
    )  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        await persister.read(KEY)
        raise AssertionError("read without a state topic")
    except CoordinatorError as exc:
        assert exc.code == ErrorCode.coordinator_not_available
    assert time.monotonic() - started < 1  # not retried for the whole retry time
