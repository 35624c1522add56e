"""The mirror state driver with fakes for the coordinator, fetchers and controller."""

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.log.clock import ManualClock
from broker.log.config import LogConfig
from broker.log.partition_log import PartitionLog
from broker.log.validation import AppendOrigin
from broker.metadata.image import (
    MIRROR_RESOURCE,
    TOPIC_RESOURCE,
    Delta,
    MetadataImage,
    apply_records,
)
from broker.metadata.mirror_states import MirrorState, can_transition
from broker.mirror import failover as failover_module
from broker.mirror import manager as manager_module
from broker.mirror.core.truncation import lme_cut
from broker.mirror.manager import MirrorManager, SourceRefused, next_state, wanted_from_config
from broker.replication.partition import Partition, sole_leader
from protocol.metadata_records import latest_type
from protocol.records import (
    ControlType,
    Record,
    build_batch,
    build_mirror_pid_reset,
    iter_records,
    parse_control_record,
    scan_batches,
)

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
ConfigRecord = latest_type("ConfigRecord")


class States:
    def __init__(self) -> None:
        self.states: dict[Any, MirrorState] = {}
        self.lme: dict[Any, int] = {}
        self.history: list[tuple[Any, MirrorState]] = []

    async def read_state(self, m: str, tid: uuid.UUID, p: int) -> tuple[MirrorState, int | None]:
        return self.states.get((m, tid, p), MirrorState.UNKNOWN), self.lme.get((m, tid, p))

    async def write_state(self, m: str, tid: uuid.UUID, p: int, new: MirrorState) -> None:
        old = self.states.get((m, tid, p), MirrorState.UNKNOWN)
        assert old == new or can_transition(old, new), f"{old.name} -> {new.name}"
        self.states[(m, tid, p)] = new
        self.history.append(((m, tid, p), new))

    async def write_last_mirror_epoch(self, m: str, tid: uuid.UUID, p: int, epoch: int) -> None:
        self.lme[(m, tid, p)] = epoch

    async def write_partition(
        self, m: str, tid: uuid.UUID, p: int, state: MirrorState | None, epoch: int | None
    ) -> None:
        if epoch is not None:
            await self.write_last_mirror_epoch(m, tid, p, epoch)
        if state is not None:
            await self.write_state(m, tid, p, state)


class Fetchers:
    def __init__(self) -> None:
        self.active: dict[Any, str] = {}

    async def add(self, mirror: str, source: Any, partitions: Any) -> None:
        assert source.get("bootstrap.servers")
        for key in partitions:
            self.active[key] = mirror

    async def remove(self, mirror: str, partitions: Any) -> None:
        for key in partitions:
            self.active.pop(key, None)


class Replicas:
    def __init__(self, hosted: dict[Any, Partition]) -> None:
        self.hosted = hosted

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.hosted.get((topic, partition))


@pytest.fixture
def world(tmp_path: Path) -> Any:
    tid = uuid.uuid4()
    clock = ManualClock(1_700_000_000_000)
    plog = PartitionLog.open(tmp_path, "t", 0, tid, LogConfig(), clock)
    # mirrored data at source epoch 7, byte for byte
    plog.append_raw(
        build_batch([Record(key=None, value=b"x")] * 3, base_offset=0, partition_leader_epoch=7),
        now_ms=clock.now_ms(),
    )
    plog.high_watermark = plog.log_end_offset
    hosted = sole_leader(plog, clock.now_ms)
    w: dict[str, Any] = {
        "image": MetadataImage(),
        "tid": tid,
        "plog": plog,
        "hosted": hosted,
        "cleared": [],
        "bumps": [],
    }

    def commit(records: list[Any]) -> Delta:
        start = w["image"].offset + 1
        w["image"], delta = apply_records(w["image"], list(enumerate(records, start)))
        return delta

    w["commit"] = commit
    commit(
        [
            ConfigRecord(
                resource_type=MIRROR_RESOURCE,
                resource_name="m",
                name="bootstrap.servers",
                value="127.0.0.1:1",
            ),
            TopicRecord(name="t", topic_id=tid),
            PartitionRecord(
                partition_id=0,
                topic_id=tid,
                replicas=(1,),
                isr=(1,),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            ),
            ConfigRecord(
                resource_type=TOPIC_RESOURCE, resource_name="t", name="mirror.name", value="m"
            ),
        ]
    )

    async def bump(topic: str, partition: int, min_epoch: int) -> None:
        w["bumps"].append(min_epoch)
        hosted.leader_epoch = min_epoch

    async def clear(topic: str) -> None:
        w["cleared"].append(topic)
        commit(
            [
                ConfigRecord(
                    resource_type=TOPIC_RESOURCE, resource_name="t", name="mirror.name", value=None
                )
            ]
        )

    async def cluster_id(mirror: str) -> str:
        return "source-cluster"

    w["states"], w["fetchers"] = States(), Fetchers()
    w["replicas"] = Replicas({("t", 0): hosted})
    w["bump"] = bump
    w["monotonic"] = [1000.0]  # the manager's clock (seconds), moved by the tests

    def make(**overrides: Any) -> MirrorManager:
        """The manager with these collaborators in place of the world's defaults."""
        params: dict[str, Any] = {
            "bump_leader_epoch": bump,
            "clear_mirror_name": clear,
            "source_cluster_id": cluster_id,
            "now_ms": clock.now_ms,
        }
        params.update(overrides)
        fetchers = params.pop("fetchers", w["fetchers"])
        w["manager"] = MirrorManager(
            lambda: w["image"], w["replicas"], w["states"], fetchers, **params
        )
        return w["manager"]

    w["make"] = make
    make()
    return w


async def _settle(m: MirrorManager) -> None:
    for _ in range(50):
        await asyncio.sleep(0)
        if not m.running:
            return
        await m.drain()


def _set(w: Any, value: str | None) -> None:
    delta = w["commit"](
        [
            ConfigRecord(
                resource_type=TOPIC_RESOURCE, resource_name="t", name="mirror.name", value=value
            )
        ]
    )
    w["manager"].on_metadata(w["image"], delta)


def test_lifecycle_start_pause_resume_failover(world: Any) -> None:
    async def run(w: Any) -> None:
        m: MirrorManager = w["manager"]
        key = ("m", w["tid"], 0)
        m.reconcile_all()
        await _settle(m)
        assert w["states"].states[key] == MirrorState.MIRRORING
        assert ("t", 0) in w["fetchers"].active and not m.writable("t", 0)
        _set(w, "m.paused")
        await _settle(m)
        assert w["states"].states[key] == MirrorState.PAUSED and not w["fetchers"].active
        assert not m.writable("t", 0)
        _set(w, "m")
        await _settle(m)
        assert w["states"].states[key] == MirrorState.MIRRORING and w["fetchers"].active
        _set(w, "m.removed")
        await _settle(m)
        assert w["states"].states[key] == MirrorState.STOPPED and not w["fetchers"].active
        assert w["states"].lme[key] == 7 and w["bumps"] == [8]
        assert w["cleared"] == ["t"] and m.writable("t", 0)
        # the MIRROR_PID_RESET control batch closes the log, at the bumped epoch
        plog = w["plog"]
        last = list(
            scan_batches(plog.read(0, 1 << 20, upper_bound=plog.log_end_offset).records[0])
        )[-1]
        assert last.is_control and last.partition_leader_epoch == 8 and last.producer_id == -1
        rec = next(iter_records(last))
        ctl = parse_control_record(rec.key, rec.value)
        assert (
            ctl.type == ControlType.MIRROR_PID_RESET and ctl.source_cluster_id == "source-cluster"
        )
        seen = [s for k, s in w["states"].history if k == key]
        assert seen == [
            MirrorState.PREPARING,
            MirrorState.MIRRORING,
            MirrorState.PAUSING,
            MirrorState.PAUSED,
            MirrorState.MIRRORING,
            MirrorState.STOPPING,
            MirrorState.STOPPED,
        ]

    asyncio.run(run(world))


def test_failed_partition_stays_failed_until_removed(world: Any) -> None:
    async def run() -> None:
        m: MirrorManager = world["manager"]
        key = ("m", world["tid"], 0)
        m.reconcile_all()
        await _settle(m)
        m.on_fetch_failed("m", "t", 0, "corrupt batch at offset 3")
        await _settle(m)
        assert world["states"].states[key] == MirrorState.FAILED and not world["fetchers"].active
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.FAILED
        _set(world, "m.removed")
        await _settle(m)
        assert world["states"].states[key] == MirrorState.STOPPED

    asyncio.run(run())


def test_restart_in_mirroring_restarts_the_fetcher(world: Any) -> None:
    async def run() -> None:
        key = ("m", world["tid"], 0)
        world["states"].states[key] = MirrorState.MIRRORING
        m: MirrorManager = world["manager"]
        m.reconcile_all()
        await _settle(m)
        assert ("t", 0) in world["fetchers"].active
        assert world["states"].history == []  # no transition was needed

    asyncio.run(run())


def test_only_a_connection_setting_change_restarts_the_fetchers(world: Any) -> None:
    """A failover writes the mirror's bookkeeping keys (the removed topics): restarting
    every fetcher of the mirror for that was thousands of tasks racing the failover."""

    class Counting(Fetchers):
        def __init__(self) -> None:
            super().__init__()
            self.adds = 0

        async def add(self, mirror: str, source: Any, partitions: Any) -> None:
            self.adds += 1
            await super().add(mirror, source, partitions)

    def mirror_config(name: str, value: str) -> None:
        delta = world["commit"](
            [ConfigRecord(resource_type=MIRROR_RESOURCE, resource_name="m", name=name, value=value)]
        )
        world["manager"].on_metadata(world["image"], delta)

    async def run() -> None:
        fetchers = Counting()
        m = world["make"](fetchers=fetchers)
        m.reconcile_all()
        await _settle(m)
        assert fetchers.adds == 1
        mirror_config("internal.removed.topics", "gone")
        await _settle(m)
        assert fetchers.adds == 1, "bookkeeping only: the fetcher keeps its connection"
        mirror_config("client.id", "other")
        await _settle(m)
        assert fetchers.adds == 2 and ("t", 0) in fetchers.active

    asyncio.run(run())


def test_the_periodic_retry_leaves_settled_partitions_alone(world: Any) -> None:
    async def run() -> None:
        clock = world["monotonic"]
        m = world["make"](monotonic=lambda: clock[0])
        m.reconcile_all()
        await _settle(m)
        assert ("t", 0) in world["fetchers"].active
        m.reconcile_all()  # MIRRORING with its fetcher: nothing to do, no task
        assert not m.running
        # paused in the image without the change reaching on_metadata: only the sweep sees it
        world["commit"](
            [
                ConfigRecord(
                    resource_type=TOPIC_RESOURCE, resource_name="t", name="mirror.name",
                    value="m.paused",
                )
            ]
        )  # fmt: skip
        m.reconcile_all()
        assert not m.running, "nothing touched it: the per-second retry does not look"
        clock[0] += manager_module.FULL_SWEEP_S
        m.reconcile_all()
        assert m.running
        await _settle(m)
        assert ("t", 0) not in world["fetchers"].active
        assert m.partitions()[("t", 0)].state == MirrorState.PAUSED

    asyncio.run(run())


def test_restart_in_stopping_keeps_the_lme_written_with_stopping(world: Any) -> None:
    # A leader died after its marker (local epoch 8) but before STOPPED: the new attempt must
    # not take the marker's epoch for the last mirrored one, nor bump again. Back as leader it
    # is in a later epoch (KRaft fences a dead broker: its partitions get a new leader epoch,
    # NO_LEADER for a sole replica); in epoch 8 still, the redo's bump (above every epoch in
    # the log, `truncation.redo_bump_floor`) would cost one spare epoch.
    async def run() -> None:
        key = ("m", world["tid"], 0)
        world["states"].states[key] = MirrorState.STOPPING
        world["states"].lme[key] = 7
        hosted = world["hosted"]
        hosted.leader_epoch = 8
        hosted.append_records(
            build_mirror_pid_reset("source-cluster", partition_leader_epoch=8, timestamp=1),
            origin=AppendOrigin.COORDINATOR,
        )
        hosted.leader_epoch = 10  # fenced (9), then leader again (10)
        _set(world, "m.removed")
        await _settle(world["manager"])
        assert world["states"].states[key] == MirrorState.STOPPED
        assert world["states"].lme[key] == 7 and world["bumps"] == []

    asyncio.run(run())


@pytest.mark.parametrize("current", list(MirrorState))
@pytest.mark.parametrize("wanted", [MirrorState.MIRRORING, MirrorState.PAUSED, MirrorState.STOPPED])
def test_every_step_is_a_valid_transition_and_chains_end(
    current: MirrorState, wanted: MirrorState
) -> None:
    state, steps = current, 0
    while (nxt := next_state(state, wanted)) is not None:
        assert can_transition(state, nxt), f"{state.name} -> {nxt.name}"
        state, steps = nxt, steps + 1
        assert steps < 8
    assert state == wanted or state == MirrorState.FAILED


def test_wanted_from_config() -> None:
    assert wanted_from_config("m.removed").state == MirrorState.STOPPED  # type: ignore[union-attr]
    assert wanted_from_config("m.paused").mirror == "m"  # type: ignore[union-attr]
    assert wanted_from_config("m").state == MirrorState.MIRRORING  # type: ignore[union-attr]
    assert wanted_from_config(None) is None and wanted_from_config("") is None


def test_truncation_point_cuts_at_first_unconfirmed_epoch() -> None:
    epochs = [(0, 0), (3, 100), (5, 250)]
    assert lme_cut(epochs, 0, 3) == 250  # epoch 5 was never mirrored back
    assert lme_cut(epochs, 0, 5) == -1  # all confirmed: nothing to cut
    assert lme_cut(epochs, 0, 1) == 100
    assert lme_cut(epochs, 40, None) == 40  # nothing known: everything
    assert lme_cut(epochs, 120, 1) == 120  # never below the log start


def test_a_source_refused_at_prepare_fails_the_partition_without_truncating(world: Any) -> None:
    """The align connection itself finds the wrong cluster (its config changed since the
    identity check): FAILED with the reason, nothing truncated, no fetcher."""

    async def align(mirror: str, topic: str, partition: int, plog: Any) -> str | None:
        raise SourceRefused("The source of mirror m is this cluster")

    async def run() -> None:
        m = world["make"](align_with_source=align)
        key = ("m", world["tid"], 0)
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.FAILED
        assert not world["fetchers"].active
        assert m.reason("t", 0) == "The source of mirror m is this cluster"

    asyncio.run(run())


def test_the_identity_check_fails_the_partition_before_it_is_fetched(world: Any) -> None:
    checked: list[str] = []

    async def verify(mirror: str) -> tuple[bool, str | None]:
        checked.append(mirror)
        return True, "The source of mirror m is cluster B, but the mirror was created against A"

    async def run() -> None:
        m = world["make"](verify_source=verify)
        key = ("m", world["tid"], 0)
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.FAILED
        assert not world["fetchers"].active and checked == ["m"]
        assert "created against A" in (m.reason("t", 0) or "")

    asyncio.run(run())


class _Brokers:
    def broker_epoch(self, broker_id: int) -> int | None:
        return 1

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        return False


class _Reg:
    def __init__(self, isr: tuple[int, ...], partition_epoch: int = 0) -> None:
        self.replicas, self.isr, self.leader = (1, 2, 3), isr, 1
        self.leader_epoch, self.partition_epoch = 0, partition_epoch


def _three_replicas(w: Any, isr: tuple[int, ...], min_isr: int = 2) -> Partition:
    """The world's log led by node 1 with followers 2 and 3 (``isr`` in sync)."""
    from broker.replication.partition_state import ReplicationConfig

    plog = w["plog"]
    hosted = Partition(
        "t", 0, w["tid"], plog, 1, _Brokers(), ReplicationConfig(30_000, min_isr), w["now_ms"]
    )
    hosted.become(_Reg(isr), broker_epoch=1)
    w["replicas"].hosted[("t", 0)] = hosted
    return hosted


def _cut_to_one(w: Any) -> Any:
    """An align that cuts the log (as an LME truncation does; here all of it: the world's
    one batch holds offsets 0-2)."""

    async def align(mirror: str, topic: str, partition: int, part: Any) -> str | None:
        part.truncate_to(1)
        return "truncated"

    return align


def test_prepare_waits_for_the_isr_to_truncate_before_mirroring(world: Any) -> None:
    """KIP-1279 LME truncation, phase two: MIRRORING only once every ISR member fetched with a
    log consistent with the leader's cut one; until then the partition stays PREPARING."""
    world["now_ms"] = lambda: 1_700_000_000_000

    async def run() -> None:
        hosted = _three_replicas(world, (1, 2, 3))
        m = world["make"](align_with_source=_cut_to_one(world), truncation_attempt_s=0.2)
        key = ("m", world["tid"], 0)
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.PREPARING
        assert "[2, 3]" in (m.reason("t", 0) or "") and not world["fetchers"].active
        assert hosted.replicas_behind(0, all_replicas=False) == [2, 3]
        end = hosted.log.log_end_offset
        _followers_fetch(hosted, end, -1)  # both fetch again from the cut point
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.MIRRORING
        assert ("t", 0) in world["fetchers"].active

    asyncio.run(run())


def test_prepare_waits_for_every_replica_with_unclean_election_support(world: Any) -> None:
    world["now_ms"] = lambda: 1_700_000_000_000

    async def run() -> None:
        hosted = _three_replicas(world, (1, 2), min_isr=1)
        world["commit"](
            [
                ConfigRecord(
                    resource_type=TOPIC_RESOURCE,
                    resource_name="t",
                    name="mirror.support.unclean.leader.election",
                    value="true",
                )
            ]
        )
        m = world["make"](align_with_source=_cut_to_one(world), truncation_attempt_s=0.1)
        key = ("m", world["tid"], 0)
        hosted.on_follower_fetch(
            2, 0, last_fetched_epoch=-1, current_leader_epoch=0, broker_epoch=1, log_start_offset=0
        )
        m.reconcile_all()
        await _settle(m)
        # node 3 is out of the ISR: with the config, every replica must truncate first
        assert world["states"].states[key] == MirrorState.PREPARING
        assert "replicas [3]" in (m.reason("t", 0) or "")

    asyncio.run(run())


def test_prepare_waits_for_min_insync_replicas(world: Any) -> None:
    world["now_ms"] = lambda: 1_700_000_000_000

    async def run() -> None:
        _three_replicas(world, (1,), min_isr=2)
        m = world["make"](align_with_source=_cut_to_one(world))
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[("m", world["tid"], 0)] == MirrorState.PREPARING
        assert "min.insync.replicas" in (m.reason("t", 0) or "")

    asyncio.run(run())


async def _reconcile_until(m: MirrorManager, done: Any, rounds: int = 60) -> None:
    """Reconcile as the node's maintenance does (every round), until ``done()`` (bounded)."""
    for _ in range(rounds):
        m.reconcile_all()
        await _settle(m)
        if done():
            return
        await asyncio.sleep(0.02)


def test_replicas_that_never_truncate_fail_the_partition_after_the_bound(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mirror.truncation.timeout.ms: the ISR holds min.insync.replicas, follower 2 fetched the
    cut log, ISR member 3 never does: FAILED once the bound has passed, the reason naming 3,
    counted for the metric; no fetcher started."""
    world["now_ms"] = lambda: 1_700_000_000_000

    async def run() -> None:
        hosted = _three_replicas(world, (1, 2, 3))
        m = world["make"](
            align_with_source=_cut_to_one(world),
            truncation_timeout_ms=300,
            truncation_attempt_s=0.05,
        )
        key = ("m", world["tid"], 0)
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.PREPARING  # within the bound
        hosted.on_follower_fetch(
            2, hosted.log.log_end_offset, last_fetched_epoch=-1, current_leader_epoch=0,
            broker_epoch=1, log_start_offset=0,
        )  # fmt: skip
        await _reconcile_until(m, lambda: world["states"].states[key] == MirrorState.FAILED)
        assert world["states"].states[key] == MirrorState.FAILED
        reason = m.reason("t", 0) or ""
        assert "ISR members [3] did not complete the LME truncation" in reason, reason
        assert "mirror.truncation.timeout.ms=300" in reason, reason
        assert m.truncation_timeouts == {"m": 1} and not world["fetchers"].active
        m.reconcile_all()  # FAILED stays FAILED (and is counted once)
        await _settle(m)
        assert world["states"].states[key] == MirrorState.FAILED
        assert m.truncation_timeouts == {"m": 1}

    asyncio.run(run())


def test_below_min_isr_retries_past_the_bound_without_failing(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fewer than min.insync.replicas in the ISR: retried round after round, however long,
    and that time does not count towards the bound once the ISR is back."""
    world["now_ms"] = lambda: 1_700_000_000_000

    async def run() -> None:
        hosted = _three_replicas(world, (1,), min_isr=2)
        m = world["make"](
            align_with_source=_cut_to_one(world),
            truncation_timeout_ms=200,
            truncation_attempt_s=0.05,
        )
        key = ("m", world["tid"], 0)
        t0 = asyncio.get_running_loop().time()
        await _reconcile_until(m, lambda: asyncio.get_running_loop().time() - t0 > 0.5)
        assert world["states"].states[key] == MirrorState.PREPARING
        assert "min.insync.replicas" in (m.reason("t", 0) or "")
        assert m.partitions()[("t", 0)].truncation_wait_since is None and not m.truncation_timeouts
        hosted.become(_Reg((1, 2, 3), partition_epoch=1), broker_epoch=1)  # the ISR is back
        m.reconcile_all()
        await _settle(m)
        # the clock starts now: one attempt (0.05 s) within the 0.2 s bound waits, not fails
        assert world["states"].states[key] == MirrorState.PREPARING
        assert "ISR members [2, 3]" in (m.reason("t", 0) or "")
        await _reconcile_until(m, lambda: world["states"].states[key] == MirrorState.FAILED)
        assert world["states"].states[key] == MirrorState.FAILED

    asyncio.run(run())


def test_the_retry_looks_again_at_what_work_touched(world: Any) -> None:
    """A reconcile that could not finish touches its partition: the next second's retry runs
    it again, without any sweep of the other partitions."""

    async def run() -> None:
        m: MirrorManager = world["manager"]
        m.reconcile_all()  # the first call sweeps everything
        await _settle(m)
        assert ("t", 0) in world["fetchers"].active
        assert m.touched == {("t", 0)}, "the finished reconcile touched it"
        m.reconcile_all()  # settled: looked at once, then dropped
        assert not m.running and m.touched == set()
        m.on_fetch_failed("m", "t", 0, "the source said no")
        await _settle(m)
        assert ("t", 0) in m.touched

    asyncio.run(run())


def test_an_add_while_a_failed_partition_is_stopping_mirrors_it_again(world: Any) -> None:
    """The KIP's recovery of a FAILED partition (remove, then add again) where the add lands
    while the partition is still STOPPING (its epoch bump not done): it goes on to STOPPED and
    then PREPARING -> MIRRORING, never staying STOPPED."""

    async def run() -> None:
        release = asyncio.Event()
        real_bump = world["bump"]

        async def slow_bump(topic: str, partition: int, min_epoch: int) -> None:
            await release.wait()
            await real_bump(topic, partition, min_epoch)

        m = world["make"](bump_leader_epoch=slow_bump)
        key = ("m", world["tid"], 0)
        m.reconcile_all()
        await _settle(m)
        m.on_fetch_failed("m", "t", 0, "replicas [3] did not complete the LME truncation")
        await _settle(m)
        assert world["states"].states[key] == MirrorState.FAILED
        _set(world, "m.removed")  # --remove
        for _ in range(20):
            await asyncio.sleep(0)
        assert world["states"].states[key] == MirrorState.STOPPING
        _set(world, "m")  # --add, while STOPPING
        for _ in range(20):
            await asyncio.sleep(0)
        release.set()
        await _settle(m)
        for _ in range(3):
            m.reconcile_all()
            await _settle(m)
        assert world["states"].states[key] == MirrorState.MIRRORING, world["states"].history
        assert ("t", 0) in world["fetchers"].active

    asyncio.run(run())


def test_a_leader_that_lost_and_regained_the_partition_reads_its_state_again(world: Any) -> None:
    """Leadership went to another node and came back (a frozen leader, fenced, then preferred
    again) before any reconcile here saw it go: what this node remembers is stale, since the
    other leader moved the partition on in the coordinator. The state is read again (the
    leader epoch moved), so a --remove and an --add still step the partition."""

    async def run() -> None:
        m: MirrorManager = world["manager"]
        key = ("m", world["tid"], 0)
        hosted = world["hosted"]
        m.reconcile_all()
        await _settle(m)
        _set(world, "m.removed")
        await _settle(m)
        assert world["states"].states[key] == MirrorState.STOPPED
        # meanwhile, under another leader: --add, PREPARING, MIRRORING (this node saw nothing)
        world["states"].states[key] = MirrorState.MIRRORING
        world["commit"](
            [
                ConfigRecord(
                    resource_type=TOPIC_RESOURCE, resource_name="t", name="mirror.name",
                    value="m",
                )
            ]
        )  # fmt: skip
        hosted.leader_epoch += 2  # away and back
        _set(world, "m.removed")  # --remove reaches this node, leader again
        await _settle(m)
        for _ in range(3):
            m.reconcile_all()
            await _settle(m)
        assert world["states"].states[key] == MirrorState.STOPPED, world["states"].history
        assert m.partitions()[("t", 0)].state == MirrorState.STOPPED
        _set(world, "m")  # --add
        await _settle(m)
        assert world["states"].states[key] == MirrorState.MIRRORING, world["states"].history

    asyncio.run(run())


def _followers_fetch(hosted: Partition, offset: int, last_epoch: int) -> None:
    """Followers 2 and 3 fetch from ``offset``, having last fetched ``last_epoch``."""
    for follower in (2, 3):
        hosted.on_follower_fetch(
            follower, offset, last_fetched_epoch=last_epoch, current_leader_epoch=0,
            broker_epoch=1, log_start_offset=0,
        )  # fmt: skip


async def _removed(
    world: Any,
    hosted: Partition,
    state: MirrorState,
    *,
    lme: int | None = None,
    bumps: list[int] | None = None,
) -> tuple[Any, tuple[str, Any, int]]:
    """A manager whose epoch bumps land on ``hosted`` (noted in ``bumps``), its partition
    ``state`` (with ``lme``) in the coordinator, settled after the topic's ``mirror.name``
    became ``m.removed``; the manager and the partition's state key."""

    async def bump(topic: str, partition: int, min_epoch: int) -> None:
        if bumps is not None:
            bumps.append(min_epoch)
        hosted.leader_epoch = min_epoch

    m = world["make"](bump_leader_epoch=bump)
    key = ("m", world["tid"], 0)
    world["states"].states[key] = state
    if lme is not None:
        world["states"].lme[key] = lme
    _set(world, "m.removed")
    await _settle(m)
    return m, key


def _markers(plog: Any) -> list[Any]:
    raw = plog.read(0, 1 << 20, upper_bound=plog.log_end_offset).records[0]
    return [
        b
        for b in scan_batches(raw)
        if b.is_control
        and parse_control_record(*_key_value(b)).type == ControlType.MIRROR_PID_RESET
    ]


def _key_value(batch: Any) -> tuple[Any, Any]:
    rec = next(iter_records(batch))
    return rec.key, rec.value


def test_stopped_waits_until_the_marker_is_committed(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """STOPPED (terminal, writable) only once every ISR member has the MIRROR_PID_RESET marker:
    written before, a leader change would lose the marker for good. The leader that appended
    it waits again on the next reconcile instead of appending another."""
    world["now_ms"] = lambda: 1_700_000_000_000
    monkeypatch.setattr(failover_module, "MARKER_COMMIT_WAIT_S", 0.1)

    async def run() -> None:
        hosted = _three_replicas(world, (1, 2, 3))

        m, key = await _removed(world, hosted, MirrorState.MIRRORING)
        plog = world["plog"]
        assert len(_markers(plog)) == 1
        assert world["states"].states[key] == MirrorState.STOPPING, world["states"].history
        assert not m.writable("t", 0) and not world["cleared"]
        assert "MIRROR_PID_RESET marker at offset 3" in (m.reason("t", 0) or "")
        m.reconcile_all()  # the next retry: still not committed, no second marker
        await _settle(m)
        assert world["states"].states[key] == MirrorState.STOPPING
        assert len(_markers(plog)) == 1
        end = plog.log_end_offset
        _followers_fetch(hosted, end, 8)  # the followers copy the marker: the HW passes it
        assert hosted.leader.high_watermark == end
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.STOPPED, world["states"].history
        assert m.writable("t", 0) and world["cleared"] == ["t"]
        assert len(_markers(plog)) == 1

    asyncio.run(run())


def test_a_new_leader_in_stopping_appends_the_marker_again(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker was appended under another leader epoch and never seen committed (leadership
    went away and came back): this leader's STOPPING is done again, marker included, and
    STOPPED waits for that marker."""
    world["now_ms"] = lambda: 1_700_000_000_000
    monkeypatch.setattr(failover_module, "MARKER_COMMIT_WAIT_S", 0.1)

    async def run() -> None:
        hosted = _three_replicas(world, (1, 2, 3))

        m, key = await _removed(world, hosted, MirrorState.MIRRORING)
        plog = world["plog"]
        assert world["states"].states[key] == MirrorState.STOPPING
        first = _markers(plog)[0]
        hosted.leader_epoch += 1  # away and back: the marker's commit was never seen here
        m.reconcile_all()
        await _settle(m)
        # the LSO cut (bounded by the HW, 3) dropped the uncommitted marker; a new one follows
        markers = _markers(plog)
        assert (
            len(markers) == 1
            and markers[0].partition_leader_epoch == 9 != first.partition_leader_epoch
        )
        assert world["states"].states[key] == MirrorState.STOPPING
        end = plog.log_end_offset
        _followers_fetch(hosted, end, 9)
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.STOPPED, world["states"].history

    asyncio.run(run())
