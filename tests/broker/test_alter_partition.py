"""AlterPartition (56) on the active controller: Kafka's validation order and error codes, the
PartitionChangeRecord it commits, the API through the dispatcher as encoded frames, and the
broker-side sender (batching, one request in flight, retries)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.alter_partition import AlterPartitionApi
from broker.api.context import RequestContext
from broker.api.dispatcher import Dispatcher
from broker.api.listener_apis import NotEnabledOnListener
from broker.controller.alter_partition import (
    AlterPartitionControl,
    AlterPartitionResult,
    PartitionAlter,
    TopicAlter,
)
from broker.controller.cluster_control import ClusterControl
from broker.quorum.driver import NotLeaderError
from broker.replication.alter_partition_sender import AlterPartitionSender, Registration
from broker.replication.isr import AlterPartitionRequest
from broker.security.acls import Acl, AclOperation, PatternType, PermissionType, ResourceType
from broker.security.authorizer import Authorizer
from protocol.build import build
from protocol.metadata_records import latest_type
from protocol.registry import REGISTRY

from .test_cluster_control import CLUSTER, TIMEOUT, FakeCore, _beat, _core, _running, run

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
AP = 56
BROKER = "User:broker"


class World:
    """Brokers 1-3 running; topic ``t`` (partition 0: replicas 1,2,3, ISR 1,2,3, leader 1)."""

    def __init__(self, *, leader_epoch: int = 0, partition_epoch: int = 0) -> None:
        self.core: FakeCore = _core()
        self.cc = ClusterControl(self.core, CLUSTER, TIMEOUT)
        _running(self.core, self.cc, 1, 2, 3)
        self.tid = uuid.uuid4()
        run(
            self.core.commit(
                [
                    TopicRecord(name="t", topic_id=self.tid),
                    PartitionRecord(
                        partition_id=0,
                        topic_id=self.tid,
                        replicas=[1, 2, 3],
                        isr=[1, 2, 3],
                        leader=1,
                        leader_epoch=leader_epoch,
                        partition_epoch=partition_epoch,
                    ),
                ]
            )
        )
        self.control = AlterPartitionControl(self.core)

    def epoch(self, b: int) -> int:
        return self.core.image.brokers[b].epoch

    def isr(self, *members: int) -> tuple[tuple[int, int], ...]:
        return tuple((b, self.epoch(b)) for b in members)

    def part(self) -> Any:
        return self.core.image.topics["t"].partitions[0]

    def alter(
        self,
        new_isr: tuple[tuple[int, int], ...],
        *,
        sender: int = 1,
        broker_epoch: int | None = None,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
        recovery: int = 0,
        partition: int = 0,
        topic_id: uuid.UUID | None = None,
    ) -> AlterPartitionResult:
        p = self.part()
        req = PartitionAlter(
            partition,
            p.leader_epoch if leader_epoch is None else leader_epoch,
            new_isr,
            p.partition_epoch if partition_epoch is None else partition_epoch,
            recovery,
        )
        return run(
            self.control.alter_partition(
                sender,
                self.epoch(sender) if broker_epoch is None else broker_epoch,
                [TopicAlter(self.tid if topic_id is None else topic_id, (req,))],
            )
        )

    def error(self, new_isr: tuple[tuple[int, int], ...], **kw: Any) -> ErrorCode:
        res = self.alter(new_isr, **kw)
        assert res.error == ErrorCode.none
        ((p,),) = [t.partitions for t in res.topics]
        assert (p.error == ErrorCode.none) == (p.state is not None)
        return p.error


# -- the controller ------------------------------------------------------------------------


def test_shrink_then_expand_commits_only_the_isr() -> None:
    w = World(leader_epoch=4, partition_epoch=7)
    before = len(w.core.batches)
    res = w.alter(w.isr(1, 2))
    (t,) = res.topics
    (p,) = t.partitions
    assert (res.error, t.topic_id, p.error) == (ErrorCode.none, w.tid, ErrorCode.none)
    assert p.state == w.part()  # the answer is the committed state
    assert (w.part().isr, w.part().leader, w.part().leader_epoch) == ((1, 2), 1, 4)
    assert w.part().partition_epoch == 8
    ((rec,),) = w.core.batches[before:]
    assert type(rec).__name__ == "PartitionChangeRecord"
    assert (rec.isr, rec.leader, rec.replicas, rec.leader_recovery_state) == ((1, 2), -2, None, -1)
    # back in, in the leader's order
    assert w.error(((3, w.epoch(3)), (1, w.epoch(1)), (2, -1))) == ErrorCode.none
    assert (w.part().isr, w.part().leader_epoch, w.part().partition_epoch) == ((3, 1, 2), 4, 9)


def test_the_same_isr_commits_nothing() -> None:
    w = World()
    before = len(w.core.batches)
    res = w.alter(w.isr(1, 2, 3))
    assert res.topics[0].partitions[0].state == w.part()
    assert len(w.core.batches) == before and w.part().partition_epoch == 0


@pytest.mark.parametrize("broker_epoch", [-1, 10_000])
def test_a_stale_broker_epoch_refuses_the_whole_request(broker_epoch: int) -> None:
    w = World()
    before = len(w.core.batches)
    assert w.alter(w.isr(1, 2), broker_epoch=broker_epoch) == AlterPartitionResult(
        ErrorCode.stale_broker_epoch
    )
    assert w.alter(w.isr(1, 2), sender=9, broker_epoch=0).error == ErrorCode.stale_broker_epoch
    assert len(w.core.batches) == before


def test_unknown_topic_id_and_partition() -> None:
    w = World()
    assert w.error(w.isr(1, 2), topic_id=uuid.uuid4()) == ErrorCode.unknown_topic_id
    res = run(
        w.control.alter_partition(
            1,
            w.epoch(1),
            [TopicAlter(None, (PartitionAlter(0, 0, w.isr(1), 0), PartitionAlter(1, 0, (), 0)))],
        )
    )
    assert [p.error for p in res.topics[0].partitions] == [ErrorCode.unknown_topic_id] * 2
    assert w.error(w.isr(1, 2), partition=5) == ErrorCode.unknown_topic_or_partition


def test_epoch_checks_in_kafkas_order() -> None:
    w = World(leader_epoch=3, partition_epoch=5)
    # newer than the controller's: it is probably not the controller any more
    assert w.error(w.isr(1, 2), leader_epoch=4) == ErrorCode.not_controller
    assert w.error(w.isr(1, 2), partition_epoch=6) == ErrorCode.not_controller
    assert w.error(w.isr(1, 2), leader_epoch=2) == ErrorCode.fenced_leader_epoch
    # a former leader's old epoch is FENCED_LEADER_EPOCH before "not the leader"
    assert w.error(w.isr(2, 3), sender=2, leader_epoch=2) == ErrorCode.fenced_leader_epoch
    assert w.error(w.isr(2, 3), sender=2) == ErrorCode.invalid_request
    # not the leader comes before an old partition epoch
    assert w.error(w.isr(2, 3), sender=2, partition_epoch=4) == ErrorCode.invalid_request
    assert w.error(w.isr(1, 2), partition_epoch=4) == ErrorCode.invalid_update_version
    assert w.part().isr == (1, 2, 3) and w.part().partition_epoch == 5


@pytest.mark.parametrize(
    "members",
    [
        (1, 2, 4),  # 4 is not a replica
        (1, 2, 2),  # twice
        (2, 3),  # without the leader
        (),
        (-1, 1),
    ],
)
def test_an_invalid_isr_is_invalid_request(members: tuple[int, ...]) -> None:
    w = World()
    assert w.error(tuple((b, -1) for b in members)) == ErrorCode.invalid_request
    assert w.part().isr == (1, 2, 3)


@pytest.mark.parametrize("recovery", [1, 2])
def test_a_recovering_leader_is_invalid_request(recovery: int) -> None:
    # every partition is RECOVERED here: RECOVERING (ISR of one or more) is refused, as Kafka
    w = World()
    assert w.error(w.isr(1), recovery=recovery) == ErrorCode.invalid_request
    assert w.error(w.isr(1, 2), recovery=recovery) == ErrorCode.invalid_request


def test_fenced_shutting_down_and_stale_members_are_ineligible() -> None:
    w = World()
    epoch3 = w.epoch(3)
    # 3's incarnation in the request is not its registration's
    assert w.error((*w.isr(1, 2), (3, epoch3 + 1))) == ErrorCode.ineligible_replica
    assert w.error((*w.isr(1, 2), (3, -1))) == ErrorCode.none  # -1: not checked
    assert w.error(w.isr(1, 2)) == ErrorCode.none
    # 3 fenced: neither with its epoch nor with -1
    assert _beat(w.cc, w.core, 3, 100, fence=True).is_fenced
    assert w.error((*w.isr(1, 2), (3, epoch3))) == ErrorCode.ineligible_replica
    assert w.error((*w.isr(1, 2), (3, -1))) == ErrorCode.ineligible_replica
    assert not _beat(w.cc, w.core, 3, 200).is_fenced
    assert w.error(w.isr(1, 2, 3)) == ErrorCode.none
    # 2 in controlled shutdown, still registered and unfenced (it led u-0: that takes a beat)
    _topic(w, "u", [2, 1])
    res = _beat(w.cc, w.core, 2, 300, shutdown=True)
    assert not res.is_fenced and not res.should_shutdown
    assert w.core.image.brokers[2].in_controlled_shutdown
    assert w.part().isr == (1, 3)  # controlled shutdown took 2 out
    assert w.error(w.isr(1, 3, 2)) == ErrorCode.ineligible_replica
    assert w.error((*w.isr(1, 3), (2, -1))) == ErrorCode.ineligible_replica


def _topic(w: World, name: str, replicas: list[int]) -> uuid.UUID:
    tid = uuid.uuid4()
    first = replicas[0]
    run(
        w.core.commit(
            [
                TopicRecord(name=name, topic_id=tid),
                PartitionRecord(
                    partition_id=0,
                    topic_id=tid,
                    replicas=replicas,
                    isr=[first],
                    leader=first,
                    leader_epoch=0,
                    partition_epoch=0,
                ),
            ]
        )
    )
    return tid


def test_an_unregistered_replica_is_ineligible() -> None:
    w = World()
    tid = _topic(w, "u", [1, 9])
    res = run(
        w.control.alter_partition(
            1, w.epoch(1), [TopicAlter(tid, (PartitionAlter(0, 0, ((1, -1), (9, -1)), 0),))]
        )
    )
    assert res.topics[0].partitions[0].error == ErrorCode.ineligible_replica


def test_one_request_many_partitions_and_a_repeated_partition() -> None:
    w = World()
    before = len(w.core.batches)
    good = PartitionAlter(0, 0, w.isr(1, 2), 0)
    again = PartitionAlter(0, 0, w.isr(1, 3), 0)  # against the first change: an old epoch
    unknown = PartitionAlter(3, 0, w.isr(1), 0)
    res = run(w.control.alter_partition(1, w.epoch(1), [TopicAlter(w.tid, (good, again, unknown))]))
    assert [p.error for p in res.topics[0].partitions] == [
        ErrorCode.none,
        ErrorCode.invalid_update_version,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert len(w.core.batches) == before + 1 and len(w.core.batches[-1]) == 1
    assert w.part().isr == (1, 2) and w.part().partition_epoch == 1


# -- the API (encoded frames through the dispatcher) ---------------------------------------


class Api:
    def __init__(self, w: World, *, active: bool = True, authorizer: Authorizer | None = None):
        self.w = w
        self.active = active
        self.api = AlterPartitionApi(
            lambda: w.control if self.active else None,
            lambda ctx: ctx.listener == "CONTROLLER",
            lambda: authorizer,
        )
        self.dispatcher = Dispatcher(self.api.apis())

    def call(self, version: int, data: dict[str, Any], listener: str = "CONTROLLER") -> Any:
        body = build(REGISTRY.spec(AP).request_type(version), data)
        frame = REGISTRY.encode_request(version, 7, "broker-1", body)[4:]

        def ctx(header: Any) -> RequestContext:
            return RequestContext(header, "c1", listener, "127.0.0.1", principal=BROKER)

        parts = asyncio.run(self.dispatcher.handle(ctx, memoryview(frame)))
        assert parts is not None
        corr, resp = REGISTRY.decode_response(AP, version, b"".join(bytes(p) for p in parts))
        assert corr == 7
        return resp


def _request(w: World, isr: list[tuple[int, int]], *, broker_epoch: int | None = None) -> Any:
    return {
        "broker_id": 1,
        "broker_epoch": w.epoch(1) if broker_epoch is None else broker_epoch,
        "topics": [
            {
                "topic_id": w.tid,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": 0,
                        "new_isr_with_epochs": [
                            {"broker_id": b, "broker_epoch": e} for b, e in isr
                        ],
                        "new_isr": [b for b, _ in isr],
                        "partition_epoch": w.part().partition_epoch,
                    }
                ],
            }
        ],
    }


def test_served_versions() -> None:
    assert Dispatcher(Api(World()).api.apis()).supported_versions()[AP] == (2, 3)


@pytest.mark.parametrize("version", [2, 3])
def test_over_the_wire(version: int) -> None:
    w = World()
    a = Api(w)
    resp = a.call(version, _request(w, w.isr(1, 3)))
    assert resp.error_code == ErrorCode.none
    ((p,),) = [t.partitions for t in resp.topics]
    assert resp.topics[0].topic_id == w.tid
    assert (p.error_code, p.leader_id, p.leader_epoch, tuple(p.isr), p.partition_epoch) == (
        ErrorCode.none,
        1,
        0,
        (1, 3),
        1,
    )
    # v3 checks each member's broker epoch; v2 cannot carry it
    stale = _request(w, [(1, w.epoch(1)), (3, w.epoch(3)), (2, w.epoch(2) + 5)])
    resp = a.call(version, stale)
    code = resp.topics[0].partitions[0].error_code
    assert code == (ErrorCode.ineligible_replica if version == 3 else ErrorCode.none)


def test_top_level_errors_carry_no_topics() -> None:
    w = World()
    resp = Api(w).call(3, _request(w, w.isr(1, 2), broker_epoch=12345))
    assert (resp.error_code, resp.topics) == (ErrorCode.stale_broker_epoch, ())
    resp = Api(w, active=False).call(3, _request(w, w.isr(1, 2)))
    assert (resp.error_code, resp.topics) == (ErrorCode.not_controller, ())

    async def lost(records: Any) -> int:
        raise NotLeaderError(2, 5)

    w.core.commit = lost  # type: ignore[method-assign]
    resp = Api(w).call(3, _request(w, w.isr(1, 2)))
    assert (resp.error_code, resp.topics) == (ErrorCode.not_controller, ())


def test_controller_listener_only_and_cluster_action() -> None:
    w = World()
    with pytest.raises(NotEnabledOnListener):
        Api(w).call(3, _request(w, w.isr(1, 2)), listener="PLAINTEXT")
    acls: list[dict[int, Acl]] = [{}]
    a = Api(w, authorizer=Authorizer(lambda: acls[0]))
    resp = a.call(3, _request(w, w.isr(1, 2)))
    assert (resp.error_code, resp.topics) == (ErrorCode.cluster_authorization_failed, ())
    assert w.part().isr == (1, 2, 3)
    acls[0] = {
        0: Acl(
            int(ResourceType.CLUSTER),
            "kafka-cluster",
            int(PatternType.LITERAL),
            BROKER,
            "*",
            int(AclOperation.CLUSTER_ACTION),
            int(PermissionType.ALLOW),
        )
    }
    assert a.call(3, _request(w, w.isr(1, 2))).error_code == ErrorCode.none
    assert w.part().isr == (1, 2)


# -- the broker-side sender ----------------------------------------------------------------


class FakeChannel:
    """Answers with the World's API; can hold requests, fail, or answer a top-level error."""

    def __init__(self, w: World) -> None:
        self.api = Api(w)
        self.w = w
        self.bodies: list[dict[str, Any]] = []
        self.gate: asyncio.Event | None = None
        self.failures: list[BaseException | ErrorCode] = []

    async def request(self, api_key: int, body: Any, version: int | None = None) -> Any:
        assert api_key == AP and version is None
        self.bodies.append(body)
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            f = self.failures.pop(0)
            if isinstance(f, BaseException):
                raise f
            return build(REGISTRY.spec(AP).response_type(3), {"error_code": f})
        return await asyncio.to_thread(self.api.call, 3, body)


def _proposal(w: World, request_id: int, *members: int, pe: int = 0) -> AlterPartitionRequest:
    return AlterPartitionRequest(request_id, 1, 0, pe, w.isr(*members))


def test_sender_answers_with_the_committed_registration() -> None:
    w = World()
    ch = FakeChannel(w)

    async def go() -> Any:
        s = AlterPartitionSender(ch, 1, lambda: w.epoch(1))
        out = await s.send(w.tid, 0, _proposal(w, 1, 1, 2))
        await s.close()
        return out

    assert run(go()) == (ErrorCode.none, Registration((1, 2), 1, 0, 1))
    assert w.part().isr == (1, 2)


def test_sender_batches_while_one_request_is_in_flight() -> None:
    w = World()
    tid2 = uuid.uuid4()
    parts = [
        PartitionRecord(
            partition_id=i,
            topic_id=tid2,
            replicas=[1, 2],
            isr=[1, 2],
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        )
        for i in range(3)
    ]
    run(w.core.commit([TopicRecord(name="t2", topic_id=tid2), *parts]))
    ch = FakeChannel(w)

    async def go() -> list[Any]:
        s = AlterPartitionSender(ch, 1, lambda: w.epoch(1))
        ch.gate = asyncio.Event()
        first = asyncio.create_task(s.send(w.tid, 0, _proposal(w, 1, 1, 2)))
        await asyncio.sleep(0.01)
        assert len(ch.bodies) == 1  # in flight, held
        rest = [asyncio.create_task(s.send(tid2, i, _proposal(w, 10 + i, 1))) for i in range(3)]
        await asyncio.sleep(0.01)
        # a second proposal for a queued partition is not attempted (Kafka's one per partition)
        dup = await s.send(tid2, 0, _proposal(w, 20, 1))
        assert dup == (ErrorCode.operation_not_attempted, None)
        await asyncio.sleep(0.01)
        assert len(ch.bodies) == 1  # nothing more while one is in flight
        ch.gate.set()
        out = [await first, *[await r for r in rest]]
        await s.close()
        return out

    outs = run(go())
    assert [o[0] for o in outs] == [ErrorCode.none] * 4
    assert len(ch.bodies) == 2
    (t,) = ch.bodies[1]["topics"]
    assert t["topic_id"] == tid2 and [p["partition_index"] for p in t["partitions"]] == [0, 1, 2]
    assert [w.core.image.topics["t2"].partitions[i].isr for i in range(3)] == [(1,)] * 3


def test_sender_retries_failures_and_top_level_errors_with_a_fresh_epoch() -> None:
    w = World()
    ch = FakeChannel(w)
    ch.failures = [TimeoutError("no controller"), ErrorCode.stale_broker_epoch]
    epochs = [12345, w.epoch(1), w.epoch(1)]

    async def go() -> Any:
        s = AlterPartitionSender(ch, 1, lambda: epochs.pop(0), retry_backoff_ms=1)
        out = await asyncio.wait_for(s.send(w.tid, 0, _proposal(w, 1, 1, 3)), 5)
        await s.close()
        return out

    assert run(go()) == (ErrorCode.none, Registration((1, 3), 1, 0, 1))
    assert [b["broker_epoch"] for b in ch.bodies] == [12345, w.epoch(1), w.epoch(1)]


def test_sender_partition_errors_and_cancel_and_close() -> None:
    w = World()
    ch = FakeChannel(w)

    async def go() -> None:
        s = AlterPartitionSender(ch, 1, lambda: w.epoch(1))
        # a partition error is the partition's answer (no retry here: the leader decides)
        assert await s.send(w.tid, 0, _proposal(w, 1, 2, 3)) == (ErrorCode.invalid_request, None)
        assert len(ch.bodies) == 1
        # a cancelled send leaves the queue: the partition may propose again
        ch.gate = asyncio.Event()
        task = asyncio.create_task(s.send(w.tid, 0, _proposal(w, 2, 1, 2)))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0)
        assert s.queued == 0
        # close answers what waits, and what comes after
        waiting = asyncio.create_task(s.send(w.tid, 0, _proposal(w, 3, 1, 2)))
        await asyncio.sleep(0.01)
        await s.close()
        assert await waiting == (ErrorCode.operation_not_attempted, None)
        assert await s.send(w.tid, 0, _proposal(w, 4, 1)) == (
            ErrorCode.operation_not_attempted,
            None,
        )

    run(go())


# -- issue 27: an answer for another topic id is no missing answer; no endless resend ------------


def test_controller_answers_unknown_topic_id_for_an_id_whose_name_moved_on() -> None:
    """Two TopicRecords for one name (a log from before the written-state fix): the first id
    is unknown, not answered under the second id with its partition's epochs."""
    w = World()
    old = w.tid
    newer = uuid.uuid4()
    run(
        w.core.commit(
            [
                TopicRecord(name="t", topic_id=newer),
                PartitionRecord(
                    partition_id=0,
                    topic_id=newer,
                    replicas=[1, 2, 3],
                    isr=[1, 2, 3],
                    leader=2,
                    leader_epoch=0,
                    partition_epoch=0,
                ),
            ]
        )
    )
    req = TopicAlter(old, (PartitionAlter(0, 0, w.isr(1, 2), 0),))
    res = run(w.control.alter_partition(1, w.epoch(1), [req]))
    assert res.error == ErrorCode.none
    (topic,) = res.topics
    assert topic.topic_id == old
    assert [p.error for p in topic.partitions] == [ErrorCode.unknown_topic_id]


class OtherIdChannel:
    """A controller that answers every partition under another topic id (the livelock)."""

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, api_key: int, body: Any, version: int | None = None) -> Any:
        self.calls += 1
        topics = [
            {
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": 0}
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
        return build(REGISTRY.spec(AP).response_type(3), {"error_code": 0, "topics": topics})


def test_sender_drops_a_proposal_the_answer_leaves_out(caplog: pytest.LogCaptureFixture) -> None:
    w = World()
    ch = OtherIdChannel()

    async def go() -> Any:
        s = AlterPartitionSender(ch, 1, lambda: w.epoch(1), retry_backoff_ms=1)
        out = await asyncio.wait_for(s.send(w.tid, 0, _proposal(w, 1, 1, 2)), 2)
        assert s.queued == 0 and s.unanswered == 1
        await s.close()
        return out

    with caplog.at_level("WARNING"):
        assert run(go()) == (ErrorCode.unknown_server_error, None)
    assert ch.calls == 1  # not sent again
    assert "which the request did not name" in caplog.text


def test_sender_backs_off_exponentially_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    w = World()
    ch = FakeChannel(w)
    ch.failures = [ErrorCode.stale_broker_epoch] * 6

    async def go() -> tuple[Any, float, int]:
        s = AlterPartitionSender(
            ch, 1, lambda: w.epoch(1), retry_backoff_ms=10, retry_backoff_max_ms=40
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        out = await asyncio.wait_for(s.send(w.tid, 0, _proposal(w, 1, 1, 3)), 5)
        elapsed = loop.time() - t0
        retries = s.retries
        await s.close()
        return out, elapsed, retries

    with caplog.at_level("WARNING"):
        out, elapsed, retries = run(go())
    assert out[0] == ErrorCode.none
    assert retries == 6
    # 10 + 20 + 40 + 40 + 40 + 40 ms (+-20% jitter): more than 6 fixed 10 ms pauses
    assert elapsed >= 0.15
    warnings = [r for r in caplog.records if "STALE_BROKER_EPOCH" in r.getMessage()]
    assert len(warnings) == 1
