"""Broker registration, heartbeats, sessions and leadership moves on the active controller."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.config.server_config import ConfigError
from broker.controller.cluster_control import ClusterControl, HeartbeatResult
from broker.controller.controller import Controller, TopicSpec, Validators
from broker.metadata.image import MetadataImage, PartitionImage, apply_records
from protocol.metadata_records import (
    decode_metadata_record,
    encode_metadata_record,
    latest_type,
)

from .test_config_server import cfg
from .test_controller_image import MemoryQuorum

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
TIMEOUT = 9000
MV = {"metadata.version": (7, 26)}
TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
FeatureLevelRecord = latest_type("FeatureLevelRecord")
RegisterBrokerRecord = latest_type("RegisterBrokerRecord")
BrokerRegistrationChangeRecord = latest_type("BrokerRegistrationChangeRecord")


class FakeCore:
    """Controller's lock/image/commit: a commit applies the records (wire round trip) at once."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.image = MetadataImage()
        self.offset = -1
        self.batches: list[list[Any]] = []

    def current_image(self) -> MetadataImage:
        return self.image

    async def commit(self, records: Sequence[Any]) -> int:
        if not records:
            return self.offset
        pairs = []
        for r in records:
            self.offset += 1
            pairs.append((self.offset, decode_metadata_record(encode_metadata_record(r))))
        self.image, _ = apply_records(self.image, pairs)
        self.batches.append(list(records))
        return self.offset


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _core() -> FakeCore:
    core = FakeCore()
    run(core.commit([FeatureLevelRecord(name="metadata.version", feature_level=26)]))
    return core


def _register(
    cc: ClusterControl, b: int, now: int = 0, inc: uuid.UUID | None = None
) -> tuple[ErrorCode, int]:
    return run(
        cc.register(
            b,
            CLUSTER,
            inc or uuid.UUID(int=b),
            [("PLAINTEXT", "localhost", 9090 + b, 0)],
            None,
            MV,
            now,
        )
    )


def _beat(
    cc: ClusterControl,
    core: FakeCore,
    b: int,
    now: int,
    *,
    offset: int | None = None,
    fence: bool = False,
    shutdown: bool = False,
    epoch: int | None = None,
) -> HeartbeatResult:
    epoch = core.image.brokers[b].epoch if epoch is None else epoch
    at = core.offset if offset is None else offset
    return run(cc.heartbeat(b, epoch, at, fence, shutdown, now))


def _running(core: FakeCore, cc: ClusterControl, *ids: int) -> None:
    for b in ids:
        assert _register(cc, b)[0] == ErrorCode.none
        assert not _beat(cc, core, b, 0).is_fenced
        assert not core.image.brokers[b].fenced


def _topic(core: FakeCore, name: str, *parts: tuple[list[int], list[int]]) -> uuid.UUID:
    tid = uuid.uuid4()
    records: list[Any] = [TopicRecord(name=name, topic_id=tid)]
    for i, (replicas, isr) in enumerate(parts):
        records.append(
            PartitionRecord(
                partition_id=i,
                topic_id=tid,
                replicas=replicas,
                isr=isr,
                leader=isr[0],
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    run(core.commit(records))
    return tid


def _part(core: FakeCore, name: str, i: int) -> PartitionImage:
    return core.image.topics[name].partitions[i]


# -- registration ---------------------------------------------------------------------------


def test_register_fenced_epoch_is_record_offset_then_unfenced_once_caught_up() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    code, epoch = _register(cc, 1)
    assert code == ErrorCode.none
    assert epoch == 1 == core.offset  # the RegisterBrokerRecord's own offset
    assert isinstance(core.batches[-1][0], RegisterBrokerRecord)
    b = core.image.brokers[1]
    assert b.fenced and b.epoch == 1 and b.registered_offset == 1
    assert b.incarnation_id == uuid.UUID(int=1)
    # behind its registration: fenced, not caught up, nothing written
    res = _beat(cc, core, 1, 10, offset=0)
    assert (res.error, res.is_caught_up, res.is_fenced) == (ErrorCode.none, False, True)
    assert core.offset == 1
    # caught up but asking to stay fenced (still recovering its logs)
    res = _beat(cc, core, 1, 20, offset=1, fence=True)
    assert res.is_caught_up and res.is_fenced and core.image.brokers[1].fenced
    res = _beat(cc, core, 1, 30, offset=1)
    assert res.is_caught_up and not res.is_fenced and not res.should_shutdown
    assert type(core.batches[-1][0]).__name__ == "UnfenceBrokerRecord"
    assert not core.image.brokers[1].fenced


def test_epoch_follows_the_quorums_next_offset_when_given() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT, next_offset=lambda: core.offset + 1)
    core.offset += 3  # control records (LeaderChange) the image does not hold
    code, epoch = _register(cc, 1)
    assert code == ErrorCode.none and epoch == core.offset == 4
    assert core.image.brokers[1].epoch == 4


def test_wrong_cluster_id_and_unsupported_features_are_refused() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    inc = uuid.uuid4()
    res = run(cc.register(1, "another-cluster", inc, [], None, MV, 0))
    assert res == (ErrorCode.inconsistent_cluster_id, -1)
    for features in ({}, {"metadata.version": (7, 25)}):
        res = run(cc.register(1, CLUSTER, inc, [], None, features, 0))
        assert res == (ErrorCode.unsupported_version, -1)
    assert 1 not in core.image.brokers and core.offset == 0


def test_duplicate_registration_while_the_other_incarnation_is_live() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1)
    epoch = core.image.brokers[1].epoch
    _beat(cc, core, 1, 5000)
    assert _register(cc, 1, now=14_000, inc=uuid.uuid4()) == (
        ErrorCode.duplicate_broker_registration,
        -1,
    )
    # the same incarnation again: same epoch, still unfenced (KAFKA-16952)
    before = core.offset
    assert _register(cc, 1, now=14_000) == (ErrorCode.none, epoch)
    assert core.offset == before + 1 and not core.image.brokers[1].fenced
    assert core.image.brokers[1].epoch == epoch
    # the registration refreshed the session: still refused until 9 s after it
    assert _register(cc, 1, now=23_000, inc=uuid.uuid4())[0] == (
        ErrorCode.duplicate_broker_registration
    )
    code, new_epoch = _register(cc, 1, now=23_001, inc=uuid.uuid4())
    assert code == ErrorCode.none and new_epoch == core.offset > epoch
    assert core.image.brokers[1].fenced


def test_a_fenced_incarnation_does_not_block_a_new_one() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    assert _register(cc, 1)[0] == ErrorCode.none
    _beat(cc, core, 1, 100, offset=0)  # live, but never unfenced
    code, _ = _register(cc, 1, now=200, inc=uuid.uuid4())
    assert code == ErrorCode.none


def test_stale_broker_epoch() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    assert run(cc.heartbeat(7, 1, 0, False, False, 0)).error == ErrorCode.stale_broker_epoch
    _, epoch = _register(cc, 7)
    res = _beat(cc, core, 7, 0, epoch=epoch - 1)
    assert res == HeartbeatResult(ErrorCode.stale_broker_epoch)
    assert core.image.brokers[7].fenced


# -- sessions and leadership ----------------------------------------------------------------


def test_session_expiry_fences_and_moves_leadership_to_another_isr_member() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    _topic(core, "t", ([1, 2, 3], [1, 2, 3]), ([2, 3, 1], [2, 3, 1]))
    for b in (2, 3):
        _beat(cc, core, b, 6000)
    run(cc.expire_sessions(9000))  # exactly the timeout: not yet
    assert not core.image.brokers[1].fenced
    run(cc.expire_sessions(9001))
    assert core.image.brokers[1].fenced
    assert not core.image.brokers[2].fenced and not core.image.brokers[3].fenced
    p0, p1 = _part(core, "t", 0), _part(core, "t", 1)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (2, (2, 3), 1)
    assert (p1.leader, p1.isr, p1.leader_epoch) == (2, (2, 3), 0)  # only the ISR shrank
    assert type(core.batches[-1][-1]).__name__ == "FenceBrokerRecord"
    # back and caught up: unfenced, but it rejoins the ISR through its leader, not here
    res = _beat(cc, core, 1, 9500)
    assert not res.is_fenced and _part(core, "t", 0).leader == 2


def test_single_replica_partition_goes_offline_and_its_broker_leads_it_again() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2)
    _topic(core, "solo", ([1], [1]), ([2], [2]))
    _beat(cc, core, 2, 8000)
    run(cc.expire_sessions(9001))
    p = _part(core, "solo", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (-1, (1,), 1)
    assert _part(core, "solo", 1).leader == 2
    # caught up means past its RegisterBrokerRecord (and, fenced for silence, its fencing)
    res = _beat(cc, core, 1, 9500, offset=core.image.brokers[1].registered_offset - 1)
    assert res.is_fenced and _part(core, "solo", 0).leader == -1
    res = _beat(cc, core, 1, 9600)
    assert not res.is_fenced
    p = _part(core, "solo", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (1, (1,), 2)


def test_a_broker_fenced_for_silence_is_caught_up_only_past_its_fencing() -> None:
    """Issue 31: a node cut off one way (it sends, hears nothing) still gets a heartbeat through
    now and then, reporting the metadata offset it had before the cut. Unfencing it then put it
    back under leaderships and in ISRs it could not serve; it stays fenced until it reports the
    offset of the records that fenced it."""
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    _topic(core, "t", ([1, 2, 3], [1, 2, 3]))
    before_cut = core.offset  # what broker 1 has applied when it stops hearing
    for b in (2, 3):
        _beat(cc, core, b, 8000)
    run(cc.expire_sessions(9001))
    assert core.image.brokers[1].fenced
    fenced_at = core.offset
    assert fenced_at > before_cut
    for now, offset in ((9500, before_cut), (10_000, fenced_at - 1)):
        res = _beat(cc, core, 1, now, offset=offset)
        assert res.is_fenced and not res.is_caught_up, offset
        assert core.image.brokers[1].fenced and 1 not in _part(core, "t", 0).isr
    res = _beat(cc, core, 1, 10_500, offset=fenced_at)
    assert not res.is_fenced and not core.image.brokers[1].fenced
    # a new controller does not know where it was fenced: the offset it had when it took over
    run(cc.expire_sessions(10_500 + TIMEOUT + 1))
    assert core.image.brokers[1].fenced
    new = ClusterControl(core, CLUSTER, TIMEOUT)
    new.became_active(20_000)
    taken_over_at = core.image.offset
    assert _beat(new, core, 1, 20_100, offset=taken_over_at - 1).is_fenced
    assert not _beat(new, core, 1, 20_200, offset=taken_over_at).is_fenced


def test_expiry_fences_each_stale_broker_against_the_previous_fencing() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    _topic(core, "t", ([1, 2, 3], [1, 2, 3]))
    _beat(cc, core, 3, 5000)
    run(cc.expire_sessions(9001))  # 1 and 2 are both silent
    assert core.image.brokers[1].fenced and core.image.brokers[2].fenced
    p = _part(core, "t", 0)
    assert (p.leader, p.isr) == (3, (3,))
    fences = [b for b in core.batches if type(b[-1]).__name__ == "FenceBrokerRecord"]
    assert len(fences) == 2  # one commit per fenced broker, each against the previous one


def test_only_active_replicas_are_elected() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    _topic(core, "t", ([2], [2]), ([1], [1]), ([1, 3], [1, 3]))
    for b in (1, 3):
        _beat(cc, core, b, 8000)
    run(cc.expire_sessions(9001))  # 2 is fenced, last in the ISR of t-0
    assert _part(core, "t", 0).leader == -1
    assert _beat(cc, core, 1, 9100, fence=True).is_fenced
    assert (_part(core, "t", 1).leader, _part(core, "t", 2).leader) == (-1, 3)
    _beat(cc, core, 3, 9150, shutdown=True)  # 3 moves away: t-2 has nobody to go to
    assert _part(core, "t", 2).leader == -1 and core.image.brokers[3].in_controlled_shutdown
    assert not _beat(cc, core, 1, 9200).is_fenced
    # 1 leads its own partition again; not t-0 (only the fenced 2 is in sync) nor t-2 (only 3,
    # which is shutting down)
    assert [_part(core, "t", i).leader for i in range(3)] == [-1, 1, -1]


def test_want_fence_fences_a_running_broker() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2)
    _topic(core, "t", ([1, 2], [1, 2]))
    res = _beat(cc, core, 1, 100, fence=True)
    assert res.is_fenced and not res.should_shutdown
    assert core.image.brokers[1].fenced and _part(core, "t", 0).leader == 2


def test_new_incarnation_of_an_expired_unfenced_broker_moves_its_leadership() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1)
    _topic(core, "solo", ([1], [1]))
    code, epoch = _register(cc, 1, now=9001, inc=uuid.uuid4())  # kill -9, restart
    assert code == ErrorCode.none and core.image.brokers[1].fenced
    assert isinstance(core.batches[-1][0], RegisterBrokerRecord)
    assert epoch == core.offset - 1  # the RegisterBrokerRecord leads its batch
    assert _part(core, "solo", 0).leader == -1
    assert not _beat(cc, core, 1, 9100).is_fenced
    p = _part(core, "solo", 0)
    assert (p.leader, p.leader_epoch) == (1, 2)


def test_new_active_controller_gives_every_broker_a_fresh_session() -> None:
    core = _core()
    old = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, old, 1, 2)
    _topic(core, "t", ([1, 2], [1, 2]))
    # a failover: the new controller heard from nobody yet
    new = ClusterControl(core, CLUSTER, TIMEOUT)
    new.became_active(100_000)
    run(new.expire_sessions(100_000 + TIMEOUT))
    assert not core.image.brokers[1].fenced and not core.image.brokers[2].fenced
    _beat(new, core, 2, 105_000)
    run(new.expire_sessions(100_000 + TIMEOUT + 1))
    assert core.image.brokers[1].fenced and not core.image.brokers[2].fenced
    assert _part(core, "t", 0).leader == 2


def test_new_active_controller_counts_the_old_leaders_silence_from_its_last_answer() -> None:
    """Issue 31: the node that led the quorum is cut off; the new controller last heard from it
    (a quorum answer) 2.5 s before it took over. Its broker's session counts from then, never
    from more than half a session back, so it is fenced a session after it fell silent, not a
    session after the election; a broker with no such evidence gets the full session."""
    core = _core()
    old = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, old, 1, 2, 3)
    _topic(core, "t", ([1, 2, 3], [1, 2, 3]))
    silent = {1: 2500, 2: 20_000}  # node 2 answered long ago: half a session at most
    new = ClusterControl(core, CLUSTER, TIMEOUT, silent_for=silent.get)
    new.became_active(100_000)
    half = TIMEOUT // 2
    run(new.expire_sessions(100_000 + half))
    assert not any(b.fenced for b in core.image.brokers.values())
    run(new.expire_sessions(100_000 + half + 1))
    assert core.image.brokers[2].fenced and not core.image.brokers[1].fenced
    _beat(new, core, 3, 100_000 + half + 1)
    run(new.expire_sessions(100_000 + TIMEOUT - 2500))  # a session after node 1 fell silent
    assert not core.image.brokers[1].fenced
    run(new.expire_sessions(100_000 + TIMEOUT - 2500 + 1))
    assert core.image.brokers[1].fenced and _part(core, "t", 0).leader == 3
    assert not core.image.brokers[3].fenced


def test_new_active_controller_sessions_block_duplicates() -> None:
    core = _core()
    old = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, old, 1)
    new = ClusterControl(core, CLUSTER, TIMEOUT)
    new.became_active(50_000)
    assert _register(new, 1, now=50_100, inc=uuid.uuid4())[0] == (
        ErrorCode.duplicate_broker_registration
    )


# -- controlled shutdown ---------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_then_says_shut_down() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2)
    _topic(core, "t", ([1, 2], [1, 2]), ([1], [1]), ([2, 1], [2, 1]))
    behind = core.offset
    res = _beat(cc, core, 1, 100, shutdown=True)
    assert (res.is_fenced, res.should_shutdown) == (False, False)
    b1 = core.image.brokers[1]
    assert b1.in_controlled_shutdown and not b1.fenced
    assert isinstance(core.batches[-1][0], BrokerRegistrationChangeRecord)
    p0, p1, p2 = (_part(core, "t", i) for i in range(3))
    assert (p0.leader, p0.isr) == (2, (2,))
    assert (p1.leader, p1.isr) == (-1, (1,))  # one replica: offline until it is back
    assert (p2.leader, p2.isr) == (2, (2,))
    # broker 2 has not seen those records yet: not done
    _beat(cc, core, 2, 150, offset=behind)
    res = _beat(cc, core, 1, 200, shutdown=True)
    assert not res.should_shutdown and not core.image.brokers[1].fenced
    _beat(cc, core, 2, 250)
    res = _beat(cc, core, 1, 300, shutdown=True)
    assert res.should_shutdown and res.is_fenced
    assert core.image.brokers[1].fenced
    # shutting down, it takes no new partitions and cannot be elected
    assert _part(core, "t", 1).leader == -1


def test_shutdown_of_a_broker_leading_nothing_is_immediate() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2)
    _topic(core, "t", ([2, 1], [2, 1]))
    res = _beat(cc, core, 1, 100, shutdown=True)
    assert res.should_shutdown and res.is_fenced
    assert core.image.brokers[1].fenced
    assert _part(core, "t", 0).isr == (2,)


def test_fenced_broker_asking_to_shut_down_may_at_once() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _register(cc, 1)
    before = core.offset
    res = _beat(cc, core, 1, 100, offset=0, shutdown=True)
    assert res.should_shutdown and res.is_fenced and core.offset == before


# -- with the real Controller ---------------------------------------------------------------


def _controller(q: MemoryQuorum) -> Controller:
    v = Validators(topic_config=lambda k, v: v, broker_config=lambda k, v: v)
    return Controller(q, lambda: q.image, v, node_id=1)


def test_controller_commit_returns_the_last_offset() -> None:
    q = MemoryQuorum()
    c = _controller(q)
    assert run(c.commit([FeatureLevelRecord(name="metadata.version", feature_level=26)])) == 0
    cc = ClusterControl(c, CLUSTER, TIMEOUT)
    assert run(cc.register(2, CLUSTER, uuid.uuid4(), [], None, MV, 0)) == (ErrorCode.none, 1)
    assert q.image.brokers[2].epoch == 1 == q.image.brokers[2].registered_offset


def test_placement_skips_a_broker_in_controlled_shutdown() -> None:
    q = MemoryQuorum()
    c = _controller(q)
    run(c.commit([FeatureLevelRecord(name="metadata.version", feature_level=26)]))
    cc = ClusterControl(c, CLUSTER, TIMEOUT)
    for b in (1, 2):
        _, epoch = run(cc.register(b, CLUSTER, uuid.uuid4(), [], None, MV, 0))
        run(cc.heartbeat(b, epoch, q.offset, False, False, 0))
    res0 = run(c.create_topics([TopicSpec("a", assignments={0: [1]})], False))
    assert res0[0].error == ErrorCode.none
    res = run(cc.heartbeat(1, q.image.brokers[1].epoch, q.offset, False, True, 10))
    assert not res.should_shutdown and q.image.brokers[1].in_controlled_shutdown
    run(c.create_topics([TopicSpec("b", 8, 1)], False))
    assert {p.leader for p in q.image.topics["b"].partitions.values()} == {2}


# -- the image and the config ---------------------------------------------------------------


def test_registration_change_record_applies_to_its_epoch_only() -> None:
    reg = RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=uuid.UUID(int=5),
        broker_epoch=3,
        end_points=(),
        features=(),
        rack=None,
        fenced=True,
    )
    img, _ = apply_records(MetadataImage(), [(3, reg)])
    change = BrokerRegistrationChangeRecord
    img, d = apply_records(img, [(4, change(broker_id=1, broker_epoch=2, fenced=-1))])
    assert img.brokers[1].fenced and not d.brokers_changed  # another registration's
    img, d = apply_records(img, [(5, change(broker_id=1, broker_epoch=3, fenced=-1))])
    assert not img.brokers[1].fenced and d.brokers_changed
    img, _ = apply_records(
        img, [(6, change(broker_id=1, broker_epoch=3, in_controlled_shutdown=1))]
    )
    assert img.brokers[1].in_controlled_shutdown and not img.brokers[1].fenced
    img, _ = apply_records(img, [(7, change(broker_id=1, broker_epoch=3, fenced=1))])
    b = img.brokers[1]
    assert b.fenced and b.in_controlled_shutdown and b.registered_offset == 3


@pytest.mark.parametrize("key", ["broker.session.timeout.ms", "broker.heartbeat.interval.ms"])
def test_session_keys_must_be_positive(key: str) -> None:
    c, _ = cfg()
    assert (c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms) == (9000, 2000)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        cfg(f"{key}=0\n")


# -- unregistration (UnregisterBroker, 64) -----------------------------------------------------


def test_unregister_leaves_every_isr_then_removes_the_registration() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    _topic(core, "t", ([1, 2, 3], [1, 2, 3]), ([2, 3, 1], [2, 3, 1]))
    epoch = core.image.brokers[1].epoch
    assert run(cc.unregister(1)) == (ErrorCode.none, None)
    assert 1 not in core.image.brokers
    last = core.batches[-1][-1]
    assert type(last).__name__ == "UnregisterBrokerRecord"
    assert (last.broker_id, last.broker_epoch) == (1, epoch)
    p0, p1 = _part(core, "t", 0), _part(core, "t", 1)
    assert (p0.leader, p0.isr) == (2, (2, 3)) and (p1.leader, p1.isr) == (2, (2, 3))
    # its heartbeat is now stale: it registers again (Kafka's behaviour for a running broker)
    assert _beat(cc, core, 1, 10, epoch=epoch).error == ErrorCode.stale_broker_epoch
    assert run(cc.unregister(9)) == (
        ErrorCode.broker_id_not_registered,
        "Broker ID 9 is not currently registered",
    )
