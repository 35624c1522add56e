"""MirrorCoordinator (KIP-1279 __mirror_state), its RPC handlers and FindCoordinator key type 3."""

import asyncio
import base64
import uuid
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.cluster import ClusterApi
from broker.api.context import RequestContext
from broker.api.mirror_state import MirrorStateApi
from broker.api.services import Services
from broker.controller.controller import TopicResult, TopicSpec
from broker.coordinator.mirror import MirrorCoordinator
from broker.coordinator.mirror import records as rec
from broker.coordinator.mirror.records import MirrorKey
from broker.coordinator.runtime import CoordinatorError, InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from broker.metadata.image import (
    BrokerImage,
    EndpointImage,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from broker.metadata.mirror_states import MIRROR_STATE_TOPIC, MirrorState
from protocol.generated.read_mirror_states.v0 import request as rreq
from protocol.generated.write_mirror_states.v0 import request as wreq
from protocol.registry import REGISTRY
from tests.waits import wait_for_async

S = MirrorState
N = 5  # __mirror_state partitions in these tests
TOPIC_ID = uuid.UUID("5f0e7a9c-3b1d-4c2e-8a4f-6d7b9e0c1a2b")
M = "m1"

# The KIP's "valid from" lists, written out independently of broker.metadata.mirror_states.
VALID = {
    S.PREPARING: {S.UNKNOWN, S.MIRRORING, S.STOPPED},
    S.MIRRORING: {S.PREPARING, S.PAUSED},
    S.PAUSING: {S.MIRRORING},
    S.PAUSED: {S.PAUSING},
    S.STOPPING: {S.MIRRORING, S.PAUSED, S.FAILED},
    S.STOPPED: {S.STOPPING},
    S.FAILED: set(S),
}


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 10))


async def loaded(
    logs: dict[int, InMemoryRecordLog] | None = None,
) -> tuple[MirrorCoordinator, dict[int, InMemoryRecordLog]]:
    coord = MirrorCoordinator(N, ManualScheduler())
    logs = logs if logs is not None else {p: InMemoryRecordLog() for p in range(N)}
    for p, log in logs.items():
        await coord.load(p, log)
    return coord, logs


def seeded(state: MirrorState, partition: int = 0) -> dict[int, InMemoryRecordLog]:
    logs = {p: InMemoryRecordLog() for p in range(N)}
    if state != S.UNKNOWN:
        coord = MirrorCoordinator(N, ManualScheduler())
        k = MirrorKey(M, TOPIC_ID, partition)
        shard = coord.partition_for(M, TOPIC_ID, partition)
        logs[shard].records.append((rec.state_key(k), rec.state_value(state)))
    return logs


# -- transitions ----------------------------------------------------------------------------


@pytest.mark.parametrize("old", list(S))
def test_every_transition_from(old: MirrorState) -> None:
    async def body() -> None:
        for new in S:
            if new == S.UNKNOWN:
                continue
            coord, logs = await loaded(seeded(old))
            log = logs[coord.partition_for(M, TOPIC_ID, 0)]
            before = len(log.records)
            if new == old:
                await coord.write_state(M, TOPIC_ID, 0, new, topic_name="t")
                assert len(log.records) == before, f"{old}->{new} rewrote the same state"
            elif old in VALID[new]:
                await coord.write_state(M, TOPIC_ID, 0, new, topic_name="t")
                assert log.records[before:] == [
                    (rec.state_key(MirrorKey(M, TOPIC_ID, 0)), rec.state_value(new))
                ]
            else:
                with pytest.raises(CoordinatorError) as ei:
                    await coord.write_state(M, TOPIC_ID, 0, new, topic_name="t")
                assert ei.value.code == 145, f"{old}->{new}"
                assert str(ei.value) == (
                    f"cannot move t-0 of mirror {M} from {old.name} to {new.name}"
                )
                assert len(log.records) == before
            expected = new if (new == old or old in VALID[new]) else old
            assert (await coord.read_state(M, TOPIC_ID, 0))[0] == expected

    run(body())


def test_writing_unknown_is_refused() -> None:
    async def body() -> None:
        coord, _ = await loaded()
        with pytest.raises(CoordinatorError) as ei:
            await coord.write_state(M, TOPIC_ID, 0, S.UNKNOWN)
        assert ei.value.code == 145

    run(body())


def test_full_lifecycle_and_reload() -> None:
    async def body() -> None:
        coord, logs = await loaded()
        assert await coord.read_state(M, TOPIC_ID, 3) == (S.UNKNOWN, None)
        for st in (S.PREPARING, S.MIRRORING, S.PAUSING, S.PAUSED, S.MIRRORING):
            await coord.write_state(M, TOPIC_ID, 3, st)
        await coord.write_last_mirror_epoch(M, TOPIC_ID, 3, 7)
        await coord.write_state(M, TOPIC_ID, 1, S.PREPARING)
        assert await coord.read_state(M, TOPIC_ID, 3) == (S.MIRRORING, 7)
        # A restart: a fresh coordinator over the same logs.
        again, _ = await loaded(logs)
        assert await again.read_state(M, TOPIC_ID, 3) == (S.MIRRORING, 7)
        assert await again.read_state(M, TOPIC_ID, 1) == (S.PREPARING, None)
        assert again.states(M) == [
            ((M, TOPIC_ID, 1), S.PREPARING, None),
            ((M, TOPIC_ID, 3), S.MIRRORING, 7),
        ]
        assert again.states("other") == []

    run(body())


def test_state_and_epoch_in_one_append() -> None:
    async def body() -> None:
        coord, logs = await loaded(seeded(S.MIRRORING, 2))
        log = logs[coord.partition_for(M, TOPIC_ID, 2)]
        before = len(log.records)
        await coord.write_partition(M, TOPIC_ID, 2, S.STOPPING, 4)
        k = MirrorKey(M, TOPIC_ID, 2)
        assert log.records[before:] == [
            (rec.state_key(k), rec.state_value(S.STOPPING)),
            (rec.epoch_key(k), rec.epoch_value(4)),
        ]
        # an invalid transition writes neither record
        with pytest.raises(CoordinatorError):
            await coord.write_partition(M, TOPIC_ID, 2, S.MIRRORING, 9)
        assert await coord.read_state(M, TOPIC_ID, 2) == (S.STOPPING, 4)

    run(body())


def test_failed_append_changes_nothing() -> None:
    async def body() -> None:
        coord, logs = await loaded(seeded(S.PREPARING))
        log = logs[coord.partition_for(M, TOPIC_ID, 0)]
        log.fail_appends = 1
        with pytest.raises(CoordinatorError) as ei:
            await coord.write_state(M, TOPIC_ID, 0, S.MIRRORING)
        assert ei.value.code == ErrorCode.coordinator_not_available
        assert await coord.read_state(M, TOPIC_ID, 0) == (S.PREPARING, None)
        await coord.write_state(M, TOPIC_ID, 0, S.MIRRORING)
        assert await coord.read_state(M, TOPIC_ID, 0) == (S.MIRRORING, None)

    run(body())


# -- tombstones -------------------------------------------------------------------------------


def test_delete_writes_tombstones_for_both_records() -> None:
    async def body() -> None:
        coord, logs = await loaded()
        await coord.write_state(M, TOPIC_ID, 0, S.PREPARING)
        await coord.write_last_mirror_epoch(M, TOPIC_ID, 0, 3)
        await coord.delete(M, TOPIC_ID, 0)
        k = MirrorKey(M, TOPIC_ID, 0)
        log = logs[coord.partition_for(M, TOPIC_ID, 0)]
        assert set(log.records[-2:]) == {(rec.state_key(k), None), (rec.epoch_key(k), None)}
        assert await coord.read_state(M, TOPIC_ID, 0) == (S.UNKNOWN, None)
        assert coord.states() == []
        again, _ = await loaded(logs)
        assert await again.read_state(M, TOPIC_ID, 0) == (S.UNKNOWN, None)
        # after removal the partition may be added again
        await again.write_state(M, TOPIC_ID, 0, S.PREPARING)

    run(body())


def test_delete_matching_mirror_and_topic() -> None:
    async def body() -> None:
        coord, _ = await loaded()
        other = uuid.uuid4()
        for p in range(6):
            await coord.write_state(M, TOPIC_ID, p, S.PREPARING)
            await coord.write_state(M, other, p, S.PREPARING)
            await coord.write_state("m2", TOPIC_ID, p, S.PREPARING)
        assert await coord.delete_matching(M, TOPIC_ID) == 6
        assert {e[0][1] for e in coord.states(M)} == {other}
        assert await coord.delete_matching(M) == 6
        assert coord.states(M) == [] and len(coord.states("m2")) == 6

    run(body())


# -- routing and ownership --------------------------------------------------------------------


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:  # ASCII keys: one UTF-16 unit per char
        h = (31 * h + ord(ch)) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_partition_for_matches_the_prototype_formula() -> None:
    coord = MirrorCoordinator(50, ManualScheduler())
    # Kafka prints Uuid(0, 1) as AAAAAAAAAAAAAAAAAAAAAQ (the metadata topic's id).
    tid = uuid.UUID(int=1)
    for mirror, p in [("m", 0), ("my-mirror", 7), ("a.b_c", 123)]:
        key = f"{mirror}:AAAAAAAAAAAAAAAAAAAAAQ:{p}"
        assert coord.partition_for(mirror, tid, p) == abs(_java_hash(key)) % 50
    tid2 = TOPIC_ID
    text = base64.urlsafe_b64encode(tid2.bytes).decode().rstrip("=")
    assert coord.partition_for(M, tid2, 4) == abs(_java_hash(f"{M}:{text}:4")) % 50


def test_partition_for_is_stable_and_spreads() -> None:
    a = MirrorCoordinator(50, ManualScheduler())
    b = MirrorCoordinator(50, ManualScheduler())
    hits = Counter(a.partition_for(M, TOPIC_ID, p) for p in range(1000))
    assert [a.partition_for(M, TOPIC_ID, p) for p in range(50)] == [
        b.partition_for(M, TOPIC_ID, p) for p in range(50)
    ]
    assert len(hits) >= 45, hits
    assert max(hits.values()) < 60, hits
    # different mirrors spread one partition too
    assert len({a.partition_for(f"mirror-{i}", TOPIC_ID, 0) for i in range(200)}) >= 40


def test_not_coordinator_after_unload() -> None:
    async def body() -> None:
        coord, _ = await loaded()
        shard = coord.partition_for(M, TOPIC_ID, 0)
        await coord.write_state(M, TOPIC_ID, 0, S.PREPARING)
        await coord.unload(shard)
        for call in (
            coord.read_state(M, TOPIC_ID, 0),
            coord.write_state(M, TOPIC_ID, 0, S.MIRRORING),
            coord.write_last_mirror_epoch(M, TOPIC_ID, 0, 1),
            coord.delete(M, TOPIC_ID, 0),
        ):
            with pytest.raises(CoordinatorError) as ei:
                await call
            assert ei.value.code == ErrorCode.not_coordinator
        assert coord.states() == []
        assert shard not in coord.loaded_partitions()

    run(body())


def test_load_in_progress() -> None:
    async def body() -> None:
        coord = MirrorCoordinator(N, ManualScheduler())
        shard = coord.partition_for(M, TOPIC_ID, 0)
        # enough records that loading yields to the loop part way through
        log = InMemoryRecordLog(
            (rec.epoch_key(MirrorKey(M, TOPIC_ID, p)), rec.epoch_value(p)) for p in range(2500)
        )
        task = asyncio.ensure_future(coord.load(shard, log))
        await asyncio.sleep(0)
        assert coord.is_loading(shard)
        with pytest.raises(CoordinatorError) as ei:
            await coord.read_state(M, TOPIC_ID, 0)
        assert ei.value.code == ErrorCode.coordinator_load_in_progress
        await task
        assert await coord.read_state(M, TOPIC_ID, 0) == (S.UNKNOWN, 0)
        assert len(coord.states(M)) == 2500

    run(body())


def test_foreign_record_types_are_skipped_on_load() -> None:
    async def body() -> None:
        log = InMemoryRecordLog([(b"\x00\x09whatever", b"\x00\x00")])
        coord = MirrorCoordinator(N, ManualScheduler())
        await coord.load(0, log)
        assert coord.states() == []

    run(body())


# -- handlers ---------------------------------------------------------------------------------


def _image(topics: dict[str, tuple[uuid.UUID, int]]) -> MetadataImage:
    timgs = {
        name: TopicImage(
            name,
            tid,
            MappingProxyType({p: PartitionImage(p, (1,), (1,), 1, 0, 0) for p in range(n)}),
        )
        for name, (tid, n) in topics.items()
    }
    return MetadataImage(
        topics=MappingProxyType(timgs),
        topic_names=MappingProxyType({tid: name for name, (tid, _) in topics.items()}),
    )


def _write(parts: list[tuple[int, int, int]], removed: tuple[str, ...] = ()) -> Any:
    return wreq.WriteMirrorStatesRequest(
        mirror_name=M,
        topics=(
            wreq.TopicData(
                name="t",
                partitions=tuple(
                    wreq.PartitionData(partition_index=p, state=st, last_mirror_epoch=lme)
                    for p, st, lme in parts
                ),
            ),
        ),
        removed_topics=removed,
    )


def _read(topics: dict[str, list[int]] | None) -> Any:
    return rreq.ReadMirrorStatesRequest(
        mirror_name=M,
        topics=tuple(
            rreq.TopicData(
                name=n, partitions=tuple(rreq.PartitionData(partition_index=p) for p in ps)
            )
            for n, ps in (topics or {}).items()
        ),
    )


@dataclass
class HandlerEnv:
    api: MirrorStateApi
    coord: MirrorCoordinator
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    def call(self, api_key: int, body: Any) -> Any:
        handler = self.api.read_mirror_states if api_key == 100 else self.api.write_mirror_states
        frame = REGISTRY.encode_request(0, 42, "broker-1", body)
        decoded = REGISTRY.decode_request(memoryview(frame)[4:])
        ctx = RequestContext(
            header=decoded.header, connection_id="c", listener="PLAIN", peer_host="h"
        )
        resp = self.loop.run_until_complete(asyncio.wait_for(handler(ctx, decoded.body), 10))
        assert type(resp) is REGISTRY.spec(api_key).response_type(0)
        out = REGISTRY.encode_response(api_key, 0, 42, resp)
        corr, back = REGISTRY.decode_response(api_key, 0, memoryview(out)[4:])
        assert corr == 42 and back == resp
        return back


@pytest.fixture
def env() -> Any:
    loop = asyncio.new_event_loop()
    coord = MirrorCoordinator(N, ManualScheduler())
    for p in range(N):
        loop.run_until_complete(coord.load(p, InMemoryRecordLog()))
    image = _image({"t": (TOPIC_ID, 3)})
    yield HandlerEnv(MirrorStateApi(coord, lambda: image), coord, loop)
    loop.close()


def _codes(resp: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def test_write_then_read_handlers(env: HandlerEnv) -> None:
    resp = env.call(101, _write([(0, S.PREPARING, -1), (1, S.PREPARING, -1), (2, S.PAUSED, -1)]))
    assert resp.error_code == 0
    assert _codes(resp) == {("t", 0): 0, ("t", 1): 0, ("t", 2): 145}
    resp = env.call(101, _write([(0, S.MIRRORING, -1), (1, S.UNKNOWN, 5)]))
    assert _codes(resp) == {("t", 0): 0, ("t", 1): 0}

    read = env.call(100, _read({"t": [0, 1, 2, 7], "nope": [0]}))
    assert read.error_code == 0
    rows = {(t.name, p.partition_index): p for t in read.topics for p in t.partitions}
    assert (rows["t", 0].state, rows["t", 0].last_mirror_epoch) == (S.MIRRORING, -1)
    assert (rows["t", 1].state, rows["t", 1].last_mirror_epoch) == (S.PREPARING, 5)
    assert (rows["t", 2].state, rows["t", 2].error_code) == (S.UNKNOWN, 0)
    assert rows["t", 7].error_code == ErrorCode.unknown_topic_or_partition
    assert rows["nope", 0].error_code == ErrorCode.unknown_topic_or_partition

    everything = env.call(100, _read(None))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in everything.topics] == [
        ("t", [0, 1])
    ]


def test_write_handler_bad_state_code_and_removed_topics(env: HandlerEnv) -> None:
    resp = env.call(101, _write([(0, 42, -1), (1, S.PREPARING, 3)]))
    assert _codes(resp) == {("t", 0): 145, ("t", 1): 0}
    resp = env.call(
        101,
        wreq.WriteMirrorStatesRequest(mirror_name=M, topics=(), removed_topics=("t", "gone")),
    )
    assert resp.error_code == 0
    assert _codes(resp) == {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    assert env.coord.states(M) == []
    read = env.call(100, _read({"t": [1]}))
    p = read.topics[0].partitions[0]
    assert (p.state, p.last_mirror_epoch) == (S.UNKNOWN, -1)


def test_handlers_report_not_coordinator(env: HandlerEnv) -> None:
    shard = env.coord.partition_for(M, TOPIC_ID, 0)
    env.loop.run_until_complete(env.coord.unload(shard))
    resp = env.call(101, _write([(0, S.PREPARING, -1)]))
    assert _codes(resp) == {("t", 0): ErrorCode.not_coordinator}
    read = env.call(100, _read({"t": [0]}))
    assert read.topics[0].partitions[0].error_code == ErrorCode.not_coordinator


# -- FindCoordinator key type 3 ---------------------------------------------------------------


class FakeController:
    def __init__(self, holder: dict[str, MetadataImage], fail: bool = False) -> None:
        self.holder = holder
        self.fail = fail
        self.specs: list[TopicSpec] = []

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool) -> list[Any]:
        self.specs += specs
        if self.fail:
            return [TopicResult(s.name, ErrorCode.invalid_replication_factor) for s in specs]
        img = self.holder["img"]
        topics = dict(img.topics)
        for s in specs:  # every partition led by broker 1, the node FindCoordinator names
            parts = {p: PartitionImage(p, (1,), (1,), 1, 0, 0) for p in range(s.num_partitions)}
            topics[s.name] = TopicImage(s.name, uuid.uuid4(), MappingProxyType(parts))
        self.holder["img"] = MetadataImage(topics=MappingProxyType(topics), brokers=img.brokers)
        return [TopicResult(s.name) for s in specs]


@dataclass
class _Cfg:
    mirror_topic_num_partitions: int = 7
    mirror_topic_replication_factor: int = 1


def _cluster(fail: bool = False) -> tuple[ClusterApi, FakeController]:
    broker = BrokerImage(1, 0, (EndpointImage("PLAIN", "127.0.0.1", 9092, 0),), None, False)
    holder = {"img": MetadataImage(brokers=MappingProxyType({1: broker}))}
    ctl = FakeController(holder, fail)
    services = Services(
        node_id=1,
        cluster_id="c",
        image=lambda: holder["img"],
        controller=ctl,
        replicas=None,
        log_manager=None,
        config=_Cfg(),
        now_ms=lambda: 0,
    )
    return ClusterApi(services, 3, 1), ctl


def _find(api: ClusterApi, keys: tuple[str, ...], version: int = 4) -> Any:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    body = FindCoordinatorRequest(key_type=3, coordinator_keys=keys)
    frame = REGISTRY.encode_request(version, 1, "x", body)
    decoded = REGISTRY.decode_request(memoryview(frame)[4:])
    ctx = RequestContext(header=decoded.header, connection_id="c", listener="PLAIN", peer_host="h")
    resp = asyncio.run(asyncio.wait_for(api.find_coordinator(ctx, decoded.body), 10))
    REGISTRY.encode_response(10, version, 1, resp)
    return resp


def test_find_mirror_coordinator_creates_the_state_topic_once() -> None:
    api, ctl = _cluster()
    key = f"{M}:{base64.urlsafe_b64encode(TOPIC_ID.bytes).decode().rstrip('=')}:0"
    resp = _find(api, (key, "m2:x:1"))
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in resp.coordinators] == [
        (key, 1, "127.0.0.1", 9092, ErrorCode.none),
        ("m2:x:1", 1, "127.0.0.1", 9092, ErrorCode.none),
    ]
    assert len(ctl.specs) == 1
    spec = ctl.specs[0]
    assert (spec.name, spec.num_partitions, spec.replication_factor) == (MIRROR_STATE_TOPIC, 7, 1)
    assert spec.configs["cleanup.policy"] == "compact"
    _find(api, (key,))
    assert len(ctl.specs) == 1


def test_find_mirror_coordinator_errors() -> None:
    api, _ = _cluster(fail=True)
    resp = _find(api, ("m:x:0", ""))
    assert [c.error_code for c in resp.coordinators] == [
        ErrorCode.coordinator_not_available,
        ErrorCode.invalid_request,
    ]
    assert all(c.node_id == -1 for c in resp.coordinators)


def test_ensure_mirror_state_topic() -> None:
    async def body() -> None:
        api, ctl = _cluster()
        assert await api.ensure_mirror_state_topic()
        assert await api.ensure_mirror_state_topic()
        assert len(ctl.specs) == 1

    run(body())


def test_restart_over_a_real_partition_log(tmp_path: Any) -> None:
    from broker.coordinator.partition_record_log import PartitionRecordLog
    from broker.replication.partition import sole_leader
    from tests.broker.log_helpers import T0, open_log

    async def body() -> None:
        plog = open_log(tmp_path)
        coord = MirrorCoordinator(1, ManualScheduler())
        await coord.load(0, PartitionRecordLog(sole_leader(plog, lambda: T0), lambda: T0))
        await coord.write_state(M, TOPIC_ID, 0, S.PREPARING)
        await coord.write_state(M, TOPIC_ID, 0, S.MIRRORING)
        await coord.write_partition(M, TOPIC_ID, 1, S.PREPARING, 2)
        await coord.delete(M, TOPIC_ID, 1)
        await coord.close()
        plog.close()

        reopened = open_log(tmp_path)
        again = MirrorCoordinator(1, ManualScheduler())
        await again.load(0, PartitionRecordLog(sole_leader(reopened, lambda: T0), lambda: T0))
        assert again.states() == [((M, TOPIC_ID, 0), S.MIRRORING, None)]
        reopened.close()

    run(body())


# -- pipelined writes ---------------------------------------------------------------------------


class HeldCommitLog(InMemoryRecordLog):
    """Records go in at once; each append's commit waits until the test releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[asyncio.Future[None]] = []

    def begin_append(self, records: list[Any]) -> Any:
        self._check_fail()
        self.records.extend(records)
        commit: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.commits.append(commit)
        return commit


def test_writes_go_in_without_waiting_for_the_previous_commit() -> None:
    """A failover's state writes arrive in waves (this node's, then each remote node's): each
    wave goes into the log at once, and all of them commit together."""

    async def body() -> None:
        coord, _ = await loaded({p: HeldCommitLog() for p in range(N)})
        shard = coord.partition_for(M, TOPIC_ID, 0)
        same = [p for p in range(200) if coord.partition_for(M, TOPIC_ID, p) == shard][:3]
        log = coord.runtime._slots[shard].log
        assert isinstance(log, HeldCommitLog)
        waves = []
        for i, p in enumerate(same):  # three writes, each in the log before the next: 3 batches
            waves.append(asyncio.ensure_future(coord.write_state(M, TOPIC_ID, p, S.PREPARING)))
            await wait_for_async(lambda i=i: len(log.commits) == i + 1, 5, f"write {i} in the log")
        assert len(log.commits) == 3 and not any(w.done() for w in waves)
        # committed in memory only at commit: nothing is visible yet
        assert await coord.read_state(M, TOPIC_ID, same[0]) == (S.UNKNOWN, None)
        log.commits[1].set_exception(RuntimeError("not enough replicas"))
        for c in (log.commits[0], log.commits[2]):
            c.set_result(None)
        await asyncio.wait(waves)
        assert waves[0].exception() is None and waves[2].exception() is None
        assert isinstance(waves[1].exception(), CoordinatorError)
        assert await coord.read_state(M, TOPIC_ID, same[0]) == (S.PREPARING, None)
        assert await coord.read_state(M, TOPIC_ID, same[1]) == (S.UNKNOWN, None)

    run(body())


def test_a_key_waits_for_its_previous_write_to_commit() -> None:
    """The second write of a key is checked against the state the first one committed."""

    async def body() -> None:
        coord, _ = await loaded({p: HeldCommitLog() for p in range(N)})
        log = coord.runtime._slots[coord.partition_for(M, TOPIC_ID, 0)].log
        assert isinstance(log, HeldCommitLog)
        first = asyncio.ensure_future(coord.write_state(M, TOPIC_ID, 0, S.PREPARING))
        second = asyncio.ensure_future(coord.write_state(M, TOPIC_ID, 0, S.MIRRORING))
        flushers = coord._flushers
        shard = coord.partition_for(M, TOPIC_ID, 0)
        # the flush has looked at both writes and stopped: the second is left for later
        await wait_for_async(
            lambda: (f := flushers.get(shard)) is not None and f.done(), 5, "the first flush done"
        )
        assert len(log.commits) == 1  # MIRRORING is not valid from UNKNOWN: it must wait
        log.commits[0].set_result(None)
        await wait_for_async(lambda: len(log.commits) == 2, 5, "the second write in the log")
        assert first.done() and len(log.commits) == 2
        log.commits[1].set_result(None)
        await second
        assert await coord.read_state(M, TOPIC_ID, 0) == (S.MIRRORING, None)

    run(body())
