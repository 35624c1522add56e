"""The share-partitions a leader serves: loaded at the reset point or from the share
coordinator, written there, loaded again in a new leader epoch."""

import uuid
from dataclasses import dataclass, field

from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.share.leader_states import LeaderShareStates
from broker.coordinator.share.partition import AckType, ShareConfig
from broker.coordinator.share.persister import SharePersister
from broker.coordinator.share.state_coordinator import ShareStateCoordinator
from broker.coordinator.share.state_records import ShareKey
from broker.coordinator.timer import ManualScheduler
from tests.broker.group_support import async_test

SKEY = ("g", uuid.UUID(int=5), 0)


@dataclass
class _Log:
    log_start_offset: int = 0
    high_watermark: int = 100


@dataclass
class _Hosted:
    leader_epoch: int = 1
    log: _Log = field(default_factory=_Log)


async def _persister() -> SharePersister:
    coordinator = ShareStateCoordinator(1, ManualScheduler())
    await coordinator.load(0, InMemoryRecordLog())

    async def exists() -> bool:
        return True

    return SharePersister(coordinator, lambda p: 1, 1, None, exists)  # type: ignore[arg-type]


@async_test
async def test_reset_points_and_reload_in_a_new_epoch() -> None:
    persister = await _persister()
    hosted = _Hosted()
    latest = LeaderShareStates(ShareConfig(), "latest", persister)
    await latest.load(SKEY, hosted)
    sp = latest.current(SKEY, hosted)
    assert sp is not None and sp.start_offset == 100  # the high watermark
    sp.acquire("m", 100, 109, 0)
    sp.acknowledge("m", 100, 104, [AckType.ACCEPT])
    await latest.persist(SKEY)
    # the leader moves: in the new epoch the state is read back, the lock gone
    hosted.leader_epoch = 2
    assert latest.current(SKEY, hosted) is None
    await latest.load(SKEY, hosted)
    again = latest.current(SKEY, hosted)
    assert again is not None and again.start_offset == 105 and again.available() == [(105, 109)]
    # another node (no state of its own) loads the same from the coordinator
    other = LeaderShareStates(ShareConfig(), "earliest", persister)
    await other.load(SKEY, _Hosted(leader_epoch=3))
    sp3 = other.peek(SKEY)
    assert sp3 is not None and (sp3.start_offset, sp3.next_offset) == (105, 110)


@async_test
async def test_earliest_and_memory_only() -> None:
    states = LeaderShareStates(ShareConfig(), "earliest")
    hosted = _Hosted(log=_Log(log_start_offset=7, high_watermark=50))
    await states.load(SKEY, hosted)
    sp = states.current(SKEY, hosted)
    assert sp is not None and sp.start_offset == 7
    await states.persist(SKEY)  # nowhere to write: nothing happens
    hosted.log.log_start_offset = 20  # retention moved the log start past it
    moved = states.current(SKEY, hosted)
    assert moved is not None and moved.start_offset == 20
    states.forget(SKEY)
    assert states.peek(SKEY) is None


@async_test
async def test_a_new_session_drops_a_state_the_coordinator_moved_on_from() -> None:
    """AlterShareGroupOffsets writes a new state epoch, DeleteShareGroupOffsets removes the state:
    `revalidate` (a new share session) drops the cached one, the next load reads the new one."""
    persister = await _persister()
    hosted = _Hosted()
    states = LeaderShareStates(ShareConfig(), "earliest", persister)
    await states.load(SKEY, hosted)
    await states.revalidate(SKEY)  # nothing changed: kept
    assert states.current(SKEY, hosted) is not None
    key = ShareKey(*SKEY)
    await persister.initialize(key, 1, 42)
    await states.revalidate(SKEY)
    assert states.current(SKEY, hosted) is None
    await states.load(SKEY, hosted)
    sp = states.current(SKEY, hosted)
    assert sp is not None and sp.start_offset == 42
    await persister.delete(key)
    await states.revalidate(SKEY)
    await states.load(SKEY, hosted)
    sp = states.current(SKEY, hosted)
    assert sp is not None and sp.start_offset == 0  # the reset point again
