"""The KIP-932 share coordinator over `__share_group_state`: snapshots written and read back,
reloaded from the log, fenced by leader and state epochs, initialized and deleted; the records
in Kafka's layout."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.runtime import CoordinatorError, InMemoryRecordLog
from broker.coordinator.share import state_records as rec
from broker.coordinator.share.state_coordinator import ShareStateCoordinator, coordinator_key
from broker.coordinator.share.state_records import PersistedBatch, ShareKey, ShareSnapshot
from broker.coordinator.timer import ManualScheduler
from tests.broker.group_support import async_test

T1 = uuid.UUID("5e3e70a7-f16a-4d78-ac44-04af655458d7")
KEY = ShareKey("g", T1, 0)
PARTITIONS = 3


async def _coordinator(logs: dict[int, InMemoryRecordLog]) -> ShareStateCoordinator:
    c = ShareStateCoordinator(PARTITIONS, ManualScheduler())
    for p in range(PARTITIONS):
        await c.load(p, logs.setdefault(p, InMemoryRecordLog()))
    return c


def _snapshot(leader_epoch: int, start: int, state_epoch: int = 0) -> ShareSnapshot:
    batches = (PersistedBatch(start, start + 4, 2, 1), PersistedBatch(start + 5, start + 9, 0, 3))
    return ShareSnapshot(state_epoch, leader_epoch, start, batches)


def test_coordinator_key_is_kafkas() -> None:
    # group:topic id (Kafka's base64 Uuid string):partition
    assert coordinator_key(KEY) == "g:Xj5wp_FqTXisRASvZVRY1w:0"


def test_records_round_trip_in_kafkas_layout() -> None:
    key, value = rec.snapshot_key(KEY), rec.snapshot_value(_snapshot(3, 10))
    assert key[:2] == b"\x00\x00" and value[:2] == b"\x00\x00"  # record type 0, version 0
    assert rec.decode_key(key) == KEY
    back = rec.decode_value(value)
    assert (back.leader_epoch, back.start_offset, back.batches) == (3, 10, _snapshot(3, 10).batches)
    assert rec.decode_key(b"\x00\x01" + key[2:]) is None  # a ShareUpdate record: not ours


@async_test
async def test_write_read_reload_fence_initialize_delete() -> None:
    logs: dict[int, InMemoryRecordLog] = {}
    c = await _coordinator(logs)
    assert await c.read(KEY) is None
    await c.write(KEY, _snapshot(leader_epoch=1, start=0))
    await c.write(KEY, _snapshot(leader_epoch=2, start=5))
    found = await c.read(KEY)
    assert found is not None and (found.start_offset, found.snapshot_epoch) == (5, 1)
    # a stale leader is fenced, and so is a write of another state epoch
    with pytest.raises(CoordinatorError) as e:
        await c.write(KEY, _snapshot(leader_epoch=1, start=9))
    assert e.value.code == ErrorCode.fenced_leader_epoch
    with pytest.raises(CoordinatorError) as e:
        await c.write(KEY, _snapshot(leader_epoch=2, start=9, state_epoch=4))
    assert e.value.code == ErrorCode.fenced_state_epoch
    # another coordinator loading the same log sees the last snapshot
    again = await _coordinator(logs)
    reloaded = await again.read(KEY)
    assert reloaded is not None and reloaded.start_offset == 5 and reloaded.leader_epoch == 2
    # initialize: a new state epoch, nothing in flight; older epochs are refused
    await again.initialize(KEY, state_epoch=1, start_offset=20)
    init = await again.read(KEY)
    assert init is not None and (init.state_epoch, init.start_offset, init.batches) == (1, 20, ())
    with pytest.raises(CoordinatorError):
        await again.initialize(KEY, state_epoch=0, start_offset=0)
    await again.delete(KEY)
    assert await again.read(KEY) is None
    assert await (await _coordinator(logs)).read(KEY) is None  # the tombstone reloads too
