"""ISR shrink and expand under single faults, with acks=all writes going on (min.insync=2).

(a) Cutting the link between a partition's leader and one follower: the leader drops the
follower from the ISR after ``replica.lag.time.max.ms`` while acks=all writes keep being
acknowledged by the two replicas left; healing lets the follower catch up and rejoin, and then
the three replicas hold the same bytes. The cut leaves out the active controller, so the
follower keeps heartbeating and stays unfenced: the shrink is the leader's lag check, not
fencing.
(b) A SIGSTOPped follower leaves the ISR; after SIGCONT it comes back.

The three nodes are also the three metadata voters, so only one node or one link is faulted at
a time. ``KMIRROR_FAULT_SEED`` replays the choices.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.waits import wait_for, wait_value

from .harness import FaultCluster, active_controller, fault_seed
from .replicas import compare_replicas
from .workload import MetadataWatch, SeqProducerProcess, create_topics

SEED = fault_seed()
TOPIC, PARTITIONS = "linked", 3
LAG_MS = 3000
SETTINGS = {
    "replica__lag__time__max__ms": str(LAG_MS),
    "broker__session__timeout__ms": "9000",
    "broker__heartbeat__interval__ms": "1000",
    "offsets__topic__replication__factor": "3",
    "transaction__state__log__replication__factor": "3",
}


def state(meta: MetadataWatch, p: int, since: float) -> tuple[int, list[int], list[int]] | None:
    """(leader, replicas, isr) of ``TOPIC-p`` as read after ``since``."""
    snap = meta.latest(after=since)
    return None if snap is None else snap.parts.get((TOPIC, p))


def brokers(meta: MetadataWatch, since: float) -> set[int]:
    snap = meta.latest(after=since)
    return set() if snap is None else snap.brokers


def acks_between(producer: SeqProducerProcess, p: int, t0: float, t1: float) -> int:
    return sum(t0 < t <= t1 for t in producer.refresh().deliveries[p])


def identical(fc: FaultCluster, p: int) -> list[str]:
    return compare_replicas({n.node_id: n.log_dir for n in fc.nodes}, {(TOPIC, p): [1, 2, 3]})


class Load:
    """The watchers and an acks=all producer on every partition of TOPIC, in child processes."""

    def __init__(self, fc: FaultCluster, workdir: Path) -> None:
        create_topics(fc.bootstrap, [TOPIC], PARTITIONS, 3, 2)
        self.meta = MetadataWatch(fc.bootstrap, workdir)
        self.producer = SeqProducerProcess(fc.bootstrap, TOPIC, PARTITIONS, workdir, rate=150)
        self.meta.start()
        self.producer.start()
        t = time.monotonic()
        wait_for(
            lambda: all(acks_between(self.producer, p, t, 1e18) > 0 for p in range(PARTITIONS)),
            60,
            "acks=all writes acknowledged on every partition",
            step=0.5,
        )

    def full(self, p: int, since: float) -> bool:
        s = state(self.meta, p, since)
        return s is not None and s[0] >= 0 and sorted(s[2]) == [1, 2, 3]

    def stop(self) -> list[str]:
        """Stops the clients; what went wrong on their side (the client crashes are printed)."""
        self.producer.stop()
        self.producer.join(160)
        self.meta.stop()
        self.meta.join(40)
        self.producer.refresh()
        print(f"client crashes: {self.producer.crashes + self.meta.crashes}")
        return [f"producer: {f}" for f in self.producer.fatal]


@pytest.mark.timeout(150)
def test_cut_link_shrinks_isr_and_heal_restores_it(tmp_path: Path) -> None:
    t_start = time.monotonic()
    with FaultCluster(tmp_path, SEED, links=True, **SETTINGS) as fc:
        load = Load(fc, tmp_path / "clients")
        controller = active_controller(fc)
        t = time.monotonic()
        wait_for(lambda: all(load.full(p, t) for p in range(PARTITIONS)), 30, "full ISRs")
        led = {p: s[0] for p in range(PARTITIONS) if (s := state(load.meta, p, t))}
        choices = sorted(p for p, leader in led.items() if leader != controller)
        assert choices, f"seed {SEED}: the controller {controller} leads every partition: {led}"
        p = fc.rng.choice(choices)
        leader = led[p]
        follower = ({1, 2, 3} - {leader, controller}).pop()

        fc.cut(leader, follower)
        t_cut = time.monotonic()
        shrunk = wait_value(
            lambda: (
                (s := state(load.meta, p, t_cut))
                and sorted(s[2]) == sorted({1, 2, 3} - {follower})
                and s
            ),
            LAG_MS / 1000 + 20,
            f"{TOPIC}-{p}: leader {leader} to drop follower {follower} from the ISR (seed {SEED})",
            step=0.25,
        )
        t_shrunk = time.monotonic()
        assert t_shrunk - t_cut >= LAG_MS / 1000 * 0.8, (
            f"ISR shrank {t_shrunk - t_cut:.1f}s after the cut, before replica.lag.time.max.ms"
        )
        assert shrunk[0] == leader, f"{TOPIC}-{p}: the leader moved: {shrunk}"
        live = wait_value(lambda: brokers(load.meta, t_shrunk), 10, "metadata after the shrink")
        assert follower in live, f"the cut follower {follower} was fenced: brokers {live}"
        # acks=all writes go on with two in-sync replicas
        wait_for(
            lambda: acks_between(load.producer, p, t_shrunk, time.monotonic()) > 0,
            10,
            f"{TOPIC}-{p}: an acks=all write acknowledged with ISR {shrunk[2]}",
            step=0.1,
        )
        during = state(load.meta, p, t_shrunk) or shrunk
        assert follower not in during[2], f"the cut follower {follower} rejoined: {during}"

        fc.heal(leader, follower)
        t_heal = time.monotonic()
        wait_for(
            lambda: load.full(p, t_heal),
            45,
            f"{TOPIC}-{p}: follower {follower} back in the ISR after the heal (seed {SEED})",
            step=0.25,
        )
        print(
            f"{TOPIC}-{p} leader {leader} follower {follower}: ISR shrank "
            f"{t_shrunk - t_cut:.1f}s after the cut, rejoined {time.monotonic() - t_heal:.1f}s "
            f"after the heal"
        )
        problems = load.stop()
        wait_for(
            lambda: not identical(fc, p), 30, "identical replicas", detail=lambda: identical(fc, p)
        )
        assert not problems, problems
    print(f"wall time {time.monotonic() - t_start:.0f}s")


@pytest.mark.timeout(150)
def test_stopped_follower_leaves_isr_and_returns(tmp_path: Path) -> None:
    t_start = time.monotonic()
    with FaultCluster(tmp_path, SEED, **SETTINGS) as fc:
        load = Load(fc, tmp_path / "clients")
        controller = active_controller(fc)
        t = time.monotonic()
        wait_for(lambda: all(load.full(p, t) for p in range(PARTITIONS)), 30, "full ISRs")
        led = {p: s[0] for p in range(PARTITIONS) if (s := state(load.meta, p, t))}
        # a follower that is not the active controller (stopping that one moves the quorum too)
        follower = fc.rng.choice(sorted({1, 2, 3} - {controller}))
        followed = sorted(p for p, leader in led.items() if leader != follower)
        assert followed, f"seed {SEED}: node {follower} leads every partition: {led}"

        fc.pause(fc.node(follower))
        t_stop = time.monotonic()
        wait_for(
            lambda: all(
                (s := state(load.meta, p, t_stop)) and follower not in s[2] for p in followed
            ),
            LAG_MS / 1000 + 20,
            f"stopped node {follower} out of the ISRs of {TOPIC} {followed} (seed {SEED})",
            step=0.25,
        )
        t_out = time.monotonic()
        for p in followed:
            wait_for(
                lambda p=p: acks_between(load.producer, p, t_out, time.monotonic()) > 0,  # type: ignore[misc]
                10,
                f"{TOPIC}-{p}: an acks=all write acknowledged without node {follower}",
                step=0.1,
            )

        fc.resume(fc.node(follower))
        t_cont = time.monotonic()
        wait_for(
            lambda: all(load.full(p, t_cont) for p in range(PARTITIONS)),
            45,
            f"node {follower} back in every ISR after SIGCONT (seed {SEED})",
            step=0.25,
        )
        print(
            f"node {follower}: out of the ISRs {t_out - t_stop:.1f}s after SIGSTOP, back "
            f"{time.monotonic() - t_cont:.1f}s after SIGCONT"
        )
        problems = load.stop()
        for p in followed:
            wait_for(lambda p=p: not identical(fc, p), 30, "identical replicas",
                     detail=lambda p=p: identical(fc, p))  # fmt: skip
        assert not problems, problems
    print(f"wall time {time.monotonic() - t_start:.0f}s")
