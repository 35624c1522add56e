"""A seeded model-based simulation of the controller (issue 27).

Two controller nodes share one simulated metadata log. The log commits with lag, each node
applies the committed records with its own lag, the leadership moves at random points (the
uncommitted tail kept or truncated), and random requests run concurrently on whichever node:
CreateTopics for overlapping names, CreatePartitions, DeleteTopics, AlterPartition from three
simulated brokers, broker heartbeats (fencing, unfencing), and cancellations of requests in
flight (a client's connection closing). After every step the checker asserts:

- each topic name maps to one topic id in the committed log (no second TopicRecord for a live
  name);
- per partition, leader epoch and partition epoch only increase (in the committed log and in
  each node's image);
- every answer agrees with the log: a created topic's id is committed under its name, a
  TOPIC_ALREADY_EXISTS names a topic the log holds, an accepted AlterPartition's state is one
  the committed log gave the partition;
- replaying the committed log gives each node's live image.

Each failure names its seed and how to replay it (``SimulationFailure``); the seed loop is the
one in ``tests/broker/sim_harness.py``: CONTROLLER_SIM_SEEDS seeds (default 2000) from
CONTROLLER_SIM_START (default 0); ``CONTROLLER_SEED=N ... -k replay`` runs one. Planted bugs
(validating against the committed image, dropping the rollback) are caught: the checker is not
one that cannot fail.
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller import topic_requests
from broker.controller.alter_partition import AlterPartitionControl, PartitionAlter, TopicAlter
from broker.controller.cluster_control import ClusterControl
from broker.controller.controller import Controller, TopicSpec, Validators
from broker.controller.written_state import WrittenState
from broker.metadata.image import MetadataImage, apply_records
from broker.quorum.driver import NotLeaderError
from protocol.metadata_records import latest_type
from tests.broker.sim_harness import SimulationFailure, first_failure, run_seeds, seeds_from_env

TopicRecord = latest_type("TopicRecord")
RemoveTopicRecord = latest_type("RemoveTopicRecord")
PartitionRecord = latest_type("PartitionRecord")
PartitionChangeRecord = latest_type("PartitionChangeRecord")
RegisterBrokerRecord = latest_type("RegisterBrokerRecord")

CLUSTER = "sim-cluster"
BROKERS = (1, 2, 3)
NODES = (0, 1)
NAMES = ("a", "b", "c", "d")
STEPS = 60
WHAT = "controller simulation"


def replay_command(seed: int) -> str:
    return f"CONTROLLER_SEED={seed} python -m pytest tests/broker/test_controller_simulation.py -k replay"


@dataclass(slots=True)
class Entry:
    offset: int
    epoch: int
    record: Any  # None: a LeaderChange control entry


class SimLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.committed = 0  # entries below are committed
        self.epoch = 0
        self.leader: int | None = None
        self.epoch_start = -1
        self._changed: asyncio.Future[None] | None = None

    def changed(self) -> asyncio.Future[None]:
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        return self._changed

    def notify(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)

    def append(self, epoch: int, record: Any) -> int:
        offset = len(self.entries)
        self.entries.append(Entry(offset, epoch, record))
        return offset

    def new_epoch(self, leader: int | None, keep_tail: bool) -> None:
        if not keep_tail:
            del self.entries[self.committed :]
        self.epoch += 1
        self.leader = leader
        self.epoch_start = self.append(self.epoch, None) if leader is not None else -1
        self.notify()

    def commit(self, target: int) -> None:
        """Raft commits earlier epochs' entries only with one of the current epoch."""
        if self.leader is None:
            return
        target = min(max(target, self.epoch_start + 1), len(self.entries))
        if target > self.committed:
            self.committed = target
            self.notify()


class SimNode:
    """A controller node: its committed image (applied with lag) and the quorum interface."""

    def __init__(self, node_id: int, log: SimLog) -> None:
        self.id = node_id
        self.log = log
        self.applied = 0
        self.image = MetadataImage()
        v = Validators(lambda k, v: v, lambda k, v: v, default_partitions=1)
        self.controller = Controller(self, lambda: self.image, v, node_id=node_id, ready=self.ready)
        self.cc = ClusterControl(self.controller, CLUSTER, 10_000)
        self.ap = AlterPartitionControl(self.controller)

    # -- WritableQuorum
    def leader_epoch(self) -> int | None:
        return self.log.epoch if self.log.leader == self.id else None

    def begin_append(self, records: Sequence[Any]) -> tuple[int, int]:
        if self.log.leader != self.id:
            raise NotLeaderError(-1 if self.log.leader is None else self.log.leader, self.log.epoch)
        last = -1
        for r in records:
            last = self.log.append(self.log.epoch, r)
        return self.log.epoch, last

    async def wait_committed(self, epoch: int, last: int) -> None:
        while True:
            if self.log.epoch != epoch and not last < self.log.committed:
                raise NotLeaderError(-1, self.log.epoch)
            if self.log.epoch != epoch:
                raise NotLeaderError(-1, self.log.epoch)  # the answer is unknown: say so
            if last < self.applied:
                return
            await self.log.changed()

    async def ready(self) -> None:
        """As MetadataQuorum.wait_writable: only the leader decides, once it has applied
        everything before its LeaderChange."""
        epoch = self.log.epoch
        while self.log.leader == self.id and self.applied <= self.log.epoch_start:
            await self.log.changed()
        if self.log.leader != self.id or self.log.epoch != epoch:
            raise NotLeaderError(-1, self.log.epoch)

    def apply_to(self, target: int) -> None:
        target = min(target, self.log.committed)
        if target <= self.applied:
            return
        pairs = [
            (e.offset, e.record)
            for e in self.log.entries[self.applied : target]
            if e.record is not None
        ]
        self.image = apply_records(self.image, pairs)[0]
        self.applied = target
        self.log.notify()


def replay(entries: Sequence[Entry]) -> MetadataImage:
    pairs = [(e.offset, e.record) for e in entries if e.record is not None]
    return apply_records(MetadataImage(), pairs)[0]


class Checker:
    def __init__(self, seed: int, log: SimLog, nodes: Sequence[SimNode]) -> None:
        self.seed = seed
        self.log = log
        self.nodes = nodes
        self.prev_epochs: dict[int, dict[tuple[uuid.UUID, int], tuple[int, int]]] = {}
        # the committed log, replayed incrementally (committed entries never change)
        self._done = 0
        self._live: dict[str, uuid.UUID] = {}
        self._images: dict[int, MetadataImage] = {0: MetadataImage()}
        self._history: dict[tuple[uuid.UUID, int], list[tuple[int, int, tuple[int, ...]]]] = {}

    def fail(self, what: str) -> None:
        raise SimulationFailure(WHAT, self.seed, what, (), replay_command(self.seed))

    def _follow_commits(self) -> None:
        """Replay what was committed since: names map to one id, epochs only increase."""
        img = self._images[self._done]
        while self._done < self.log.committed:
            e = self.log.entries[self._done]
            self._done += 1
            r = e.record
            if r is not None:
                if isinstance(r, TopicRecord):
                    known = self._live.get(r.name)
                    if known is not None and known != r.topic_id:
                        self.fail(f"topic {r.name} has two ids: {known} and {r.topic_id}")
                    self._live[r.name] = r.topic_id
                if isinstance(r, RemoveTopicRecord):
                    self._live = {n: t for n, t in self._live.items() if t != r.topic_id}
                img = apply_records(img, [(e.offset, r)])[0]
                if isinstance(r, PartitionRecord | PartitionChangeRecord):
                    self._partition_state(img, r.topic_id, r.partition_id)
            self._images[self._done] = img

    def _partition_state(self, img: MetadataImage, topic_id: uuid.UUID, partition: int) -> None:
        t = img.topic_by_id(topic_id)
        if t is None or partition not in t.partitions:
            return
        p = t.partitions[partition]
        states = self._history.setdefault((topic_id, partition), [])
        if states and (p.leader_epoch < states[-1][0] or p.partition_epoch <= states[-1][1]):
            self.fail(f"epochs of {t.name}-{partition} went back: {states[-1]} -> {p}")
        states.append((p.leader_epoch, p.partition_epoch, p.isr))

    def step(self) -> None:
        self._follow_commits()
        for n in self.nodes:
            if self._images[n.applied] != n.image:
                self.fail(f"node {n.id}: its image differs from the replayed log")
            now = {
                (t.topic_id, p.partition): (p.leader_epoch, p.partition_epoch)
                for t in n.image.topics.values()
                for p in t.partitions.values()
            }
            for key, (le, pe) in now.items():
                old = self.prev_epochs.get(n.id, {}).get(key)
                if old is not None and (le < old[0] or pe < old[1]):
                    self.fail(f"node {n.id}: epochs of {key} went back {old} -> {(le, pe)}")
            self.prev_epochs[n.id] = now

    def created(self, name: str, topic_id: uuid.UUID | None) -> None:
        ok = any(
            isinstance(e.record, TopicRecord)
            and e.record.name == name
            and e.record.topic_id == topic_id
            for e in self.log.entries[: self.log.committed]
        )
        if not ok:
            self.fail(f"CreateTopics answered {name} created as {topic_id}, not committed")

    def already_exists(self, name: str) -> None:
        if name not in replay(self.log.entries).topics:
            self.fail(f"CreateTopics answered {name} TOPIC_ALREADY_EXISTS; the log has no {name}")

    def altered(self, topic_id: uuid.UUID, partition: int, state: Any) -> None:
        self._follow_commits()
        hist = self._history.get((topic_id, partition), [])
        if (state.leader_epoch, state.partition_epoch, state.isr) not in hist:
            self.fail(f"AlterPartition answered {topic_id}-{partition} {state}: not committed")


async def _guard(
    checker: Checker, call: Callable[[], Awaitable[Any]], check: Callable[[Any], None]
) -> None:
    try:
        result = await call()
    except (NotLeaderError, asyncio.CancelledError):
        return
    except SimulationFailure:
        raise
    except Exception as e:  # any other exception is a finding
        checker.fail(f"request raised {type(e).__name__}: {e}")
    check(result)


async def simulate(seed: int, steps: int = STEPS) -> None:
    rng = random.Random(seed)
    log = SimLog()
    log.new_epoch(0, keep_tail=True)
    for b in BROKERS:
        log.append(
            log.epoch,
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=uuid.UUID(int=b),
                broker_epoch=len(log.entries),
                end_points=(),
                features=(),
                rack=None,
                fenced=False,
            ),
        )
    log.commit(len(log.entries))
    nodes = [SimNode(i, log) for i in NODES]
    for n in nodes:
        n.apply_to(log.committed)
    nodes[0].cc.became_active(0)
    checker = Checker(seed, log, nodes)
    tasks: list[asyncio.Task[None]] = []
    now_ms = 0

    def spawn(call: Callable[[], Awaitable[Any]], check: Callable[[Any], None]) -> None:
        tasks.append(asyncio.ensure_future(_guard(checker, call, check)))

    def create_check(results: Any) -> None:
        for r in results:
            if r.error == ErrorCode.none:
                checker.created(r.name, r.topic_id)
            elif r.error == ErrorCode.topic_already_exists:
                checker.already_exists(r.name)

    def alter_check(tid: uuid.UUID, p: int) -> Callable[[Any], None]:
        def check(res: Any) -> None:
            for t in res.topics:
                for pr in t.partitions:
                    if pr.error == ErrorCode.none:
                        checker.altered(tid, p, pr.state)

        return check

    try:
        for _ in range(steps):
            node = rng.choice(nodes)
            img = node.image
            action = rng.random()
            now_ms += 100
            if action < 0.22:
                specs = [
                    TopicSpec(n, rng.choice((-1, 1, 2)), rng.choice((-1, 1, 2)))
                    for n in rng.sample(NAMES, rng.randint(1, 2))
                ]
                spawn(partial(node.controller.create_topics, specs, False), create_check)
            elif action < 0.27:
                name = rng.choice(NAMES)
                t = img.topics.get(name)
                count = (len(t.partitions) if t else 1) + 1
                spawn(
                    partial(node.controller.create_partitions, [(name, count, None)], False),
                    lambda r: None,
                )
            elif action < 0.32:
                spawn(partial(node.controller.delete_topics, [rng.choice(NAMES)]), lambda r: None)
            elif action < 0.45 and img.topics:
                t = img.topics[rng.choice(sorted(img.topics))]
                if t.partitions:
                    p = t.partitions[rng.choice(sorted(t.partitions))]
                    outside = [r for r in p.replicas if r not in p.isr]
                    inside = [r for r in p.isr if r != p.leader]
                    isr = list(p.isr)
                    if outside and (not inside or rng.random() < 0.5):
                        isr.append(rng.choice(outside))
                    elif inside:
                        isr.remove(rng.choice(inside))
                    b = img.brokers.get(p.leader)
                    if b is not None:
                        req = PartitionAlter(
                            p.partition,
                            p.leader_epoch,
                            tuple((r, -1) for r in isr),
                            p.partition_epoch,
                        )
                        spawn(
                            partial(
                                node.ap.alter_partition,
                                p.leader,
                                b.epoch,
                                [TopicAlter(t.topic_id, (req,))],
                            ),
                            alter_check(t.topic_id, p.partition),
                        )
            elif action < 0.52:
                b = rng.choice(BROKERS)
                reg = img.brokers.get(b)
                if reg is not None:
                    spawn(
                        partial(
                            node.cc.heartbeat,
                            b,
                            reg.epoch,
                            node.applied,
                            rng.random() < 0.3,
                            False,
                            now_ms,
                        ),
                        lambda r: None,
                    )
            elif action < 0.64:
                log.commit(log.committed + rng.randint(1, 6))
            elif action < 0.76:
                node.apply_to(node.applied + rng.randint(1, 8))
            elif action < 0.80:
                new = rng.choice([*NODES, None])
                log.new_epoch(new, keep_tail=rng.random() < 0.5)
                for n in nodes:
                    if n.id == new:
                        n.cc.became_active(now_ms)
            elif action < 0.86:
                live = [t for t in tasks if not t.done()]
                if live:
                    rng.choice(live).cancel()
            for _ in range(rng.randint(0, 4)):
                await asyncio.sleep(0)
            for t in [t for t in tasks if t.done()]:
                tasks.remove(t)
                if not t.cancelled() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            checker.step()
    finally:
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for r in results:
        if isinstance(r, SimulationFailure):
            raise r


def _seeded_uuid4(ids: random.Random) -> Callable[[], uuid.UUID]:
    return lambda: uuid.UUID(int=ids.getrandbits(128))


@contextmanager
def seeded_runs() -> Iterator[Callable[[int], dict[str, int]]]:
    """A runner of one seed (placement and topic ids drawn from it too) on one event loop,
    restoring the global random state and uuid4 afterwards."""
    loop = asyncio.new_event_loop()
    state = random.getstate()
    real_uuid4 = topic_requests.uuid.uuid4

    def run(seed: int) -> dict[str, int]:
        random.seed(seed)  # placement; topic ids below
        topic_requests.uuid.uuid4 = _seeded_uuid4(random.Random(~seed))  # type: ignore[assignment]
        try:
            loop.run_until_complete(simulate(seed))
        except SimulationFailure:
            raise
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
            raise SimulationFailure(WHAT, seed, message, (), replay_command(seed)) from e
        return {}

    try:
        yield run
    finally:
        topic_requests.uuid.uuid4 = real_uuid4  # type: ignore[assignment]
        random.setstate(state)
        loop.close()


def test_controller_simulation_holds_its_invariants() -> None:
    with seeded_runs() as run:
        report = run_seeds(run, seeds_from_env("CONTROLLER_SIM_SEEDS", "CONTROLLER_SIM_START"))
    assert not report.failures, report.summary(WHAT)


def test_replay() -> None:
    """CONTROLLER_SEED=N runs seed N alone (seed 0 when unset, so the path stays tested)."""
    with seeded_runs() as run:
        run(int(os.environ.get("CONTROLLER_SEED", "0")))


def test_planted_bug_validate_against_the_committed_image_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(WrittenState, "image", lambda self: self._committed())
    with seeded_runs() as run:
        caught = first_failure(run, 300)
    assert caught is not None, "the checker missed validation against the committed image"
    assert str(caught).startswith(f"{WHAT} seed {caught.seed}: ")


def test_planted_bug_no_rollback_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WrittenState, "rollback", lambda self: None)
    with seeded_runs() as run:
        caught = first_failure(run, 300)
    assert caught is not None, "the checker missed a written state kept past the end of its epoch"
    assert str(caught).startswith(f"{WHAT} seed {caught.seed}: ")
