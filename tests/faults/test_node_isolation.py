"""Issue 31: no stall outlives its fault. A node is cut off from everything (the other nodes and
the clients, as in its own network namespace), both ways or one way, while an idempotent acks=all
producer writes to every partition; then its links heal.

The cuts go through the link proxy (tests/faults/linkproxy.py) with TCP's retransmission
emulated: a connection that carried bytes across the cut stays silent after the heal until its
next retransmission (up to the cut's length), as a real one does, which is what kept fetchers
and producers waiting in the issue's runs.

Measured for every fault, on every partition, from the producer's acknowledgements:

- outage: the longest stretch with no acknowledgement that overlaps the fault; goal at most
  ``broker.session.timeout.ms`` + 2 s (the node is fenced after the session timeout, its
  partitions move);
- after the heal: the longest stretch with no acknowledgement from the heal on (the first one
  counted from the heal); goal at most 1 s;

and after all faults: no acknowledged record lost or duplicated, every replica byte-identical.

The goals are printed for every fault and enforced with ``KMIRROR_FAULT_STRICT=1``. Without it
the run asserts what the broker alone can promise under TCP's retransmission: no stall after the
heal longer than ``RESUME_BOUND_S``, and no outage longer than the cut plus that, nor longer than
the outage goal plus ``OUTAGE_SLACK_S``. The resume goal is missed after cuts shorter than the
session (the node is not fenced): the clients' and followers' connections to it stay silent
until TCP's next retransmission, up to 1.75 s after the heal in the runs so far. A cut of 13 s
lets the controller fence the node and move its partitions before the heal, so what follows the
heal is the broker's doing; before issue 31's fixes the quorum leader's 13 s isolation left
producers stalled about 12 s after the heal (the healed node held the high watermark while its
fetch waited for TCP's retransmission at 25.4 s). An "in" cut (the node still sends, hears
nothing) gets ``CLIENT_BOUND_S``: the clients' own connections to it stay silent after the heal
until TCP retransmits. Before the heartbeat fixes (seed 4242, 3 rounds) an "in" cut was
never fenced (its heartbeats, retried on the same connection, kept arriving: 13.2 s without an
ack for a 12 s cut), and an isolated quorum leader was fenced an election plus a session after
the cut (9.2-10.5 s); now a heartbeat attempt reconnects after its bound (a new connection does
not open during a cut), a broker fenced for silence stays fenced until it has heard the
fencing, and a new controller counts the old leader's silence from its last answer.

CI runs the short form: the quorum leader isolated both ways for 13 s, then another node one way
(what it sends is lost) for 10 s, then one way the other way (it hears nothing) for 10 s (about
110 s with the cluster's start). ``KMIRROR_ISOLATION_PLAN`` (below) runs chosen faults. The
long form: ``KMIRROR_FAULT_ROUNDS=<n>`` rounds of a random node (the quorum leader
half the time), a random direction and a random cut of 3-15 s. ``KMIRROR_FAULT_SEED=<n>`` replays
a run's choices; every failure names its seed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.waits import wait_for

from .harness import FaultCluster, active_controller, fault_rounds, fault_seed
from .replicas import compare_replicas
from .workload import MetadataWatch, SeqProducerProcess, create_topics, read_partitions

SEED = fault_seed()
# KMIRROR_ISOLATION_PLAN="in:other:10,both:leader:13" replaces the rounds with these faults
# (direction : the quorum "leader" or an "other" node : cut seconds), to replay one kind
PLAN = [
    (d, who, float(s))
    for d, who, s in (
        item.split(":") for item in os.environ.get("KMIRROR_ISOLATION_PLAN", "").split(",") if item
    )
]
ROUNDS = len(PLAN) or fault_rounds(3)
LONG = ROUNDS > 3 and not PLAN
TOPIC, PARTITIONS = "isolated", 3
SESSION_MS = 6000
SETTINGS = {
    "broker__session__timeout__ms": str(SESSION_MS),
    "broker__heartbeat__interval__ms": "1000",
    "offsets__topic__replication__factor": "3",
    "transaction__state__log__replication__factor": "3",
    "min__insync__replicas": "2",
    # replica.lag.time.max.ms stays Kafka's 30 s, as in the runs: a healed node is then
    # still "caught up" by Kafka's rule, which is what let it hold the high watermark
}
OUTAGE_GOAL_S = SESSION_MS / 1000 + 2.0
RESUME_GOAL_S = 1.0
# enforced without KMIRROR_FAULT_STRICT: the outage goal plus slack for a loaded machine (18 rounds
# after the heartbeat fixes: at most 7.75 s; before them 9.2-13.2 s for a leader or an "in" cut)
OUTAGE_SLACK_S = 1.0
RESUME_BOUND_S = 3.0
CLIENT_BOUND_S = 6.0  # after an "in" cut: the clients' own connections to the node are silent
STRICT = os.environ.get("KMIRROR_FAULT_STRICT") == "1"
SETTLE_S = 6.0  # watched after each heal


@dataclass
class Fault:
    node: int
    direction: str
    quorum_leader: bool
    t_cut: float
    t_heal: float

    def __str__(self) -> str:
        who = "the quorum leader" if self.quorum_leader else "a follower voter"
        return (
            f"node {self.node} ({who}) isolated {self.direction} for "
            f"{self.t_heal - self.t_cut:.1f}s"
        )


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch in [start, end] without an acknowledgement, counted from ``start``."""
    inside = [t for t in times if start < t <= end]
    edges = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(edges))


def outage(times: list[float], fault: Fault, end: float) -> float:
    """The longest gap between acknowledgements that overlaps the fault."""
    before = [t for t in times if t <= fault.t_cut]
    start = before[-1] if before else fault.t_cut
    return longest_gap(times, start, end)


def acked_since(producer: SeqProducerProcess, t: float) -> bool:
    """Has every partition had an acknowledgement after ``t``?"""
    producer.refresh()
    return all(any(d > t for d in producer.deliveries[p]) for p in range(PARTITIONS))


def measure(producer: SeqProducerProcess, fault: Fault) -> tuple[float, float]:
    """(worst outage, worst stall after the heal) over the partitions, up to now (at least
    ``SETTLE_S`` after the heal, and after every partition's first ack since the heal)."""
    producer.refresh()
    end = time.monotonic()
    outs = [outage(producer.deliveries[p], fault, end) for p in range(PARTITIONS)]
    after = [longest_gap(producer.deliveries[p], fault.t_heal, end) for p in range(PARTITIONS)]
    return max(outs), max(after)


def plan(fc: FaultCluster, r: int, controller: int) -> tuple[int, str, float]:
    """(node, direction, cut seconds) of round ``r``: the short form's two faults, else random."""
    others = sorted({1, 2, 3} - {controller})
    if PLAN:
        direction, who, seconds = PLAN[r]
        return (controller if who == "leader" else fc.rng.choice(others)), direction, seconds
    if not LONG:
        if r == 0:
            return controller, "both", 13.0
        return fc.rng.choice(others), ("out" if r == 1 else "in"), 10.0
    node = controller if fc.rng.random() < 0.5 else fc.rng.choice(others)
    return node, fc.rng.choice(["both", "out", "in"]), fc.rng.uniform(3.0, 15.0)


def full_isrs(meta: MetadataWatch, since: float) -> bool:
    snap = meta.latest(after=since)
    return (
        snap is not None
        and bool(snap.parts)
        and all(ld >= 0 and sorted(isr) == sorted(reps) for ld, reps, isr in snap.parts.values())
    )


@pytest.mark.timeout(200 + ROUNDS * 60)
def test_no_stall_outlives_a_node_isolation(tmp_path: Path) -> None:
    t_start = time.monotonic()
    with FaultCluster(tmp_path, SEED, links=True, retransmit=True, **SETTINGS) as fc:
        bootstrap = fc.front_bootstrap  # through the proxy: isolation cuts the clients too
        create_topics(bootstrap, [TOPIC], PARTITIONS, 3, 2)
        clients = tmp_path / "clients"
        producer = SeqProducerProcess(
            bootstrap, TOPIC, PARTITIONS, clients, rate=150, request_timeout_ms=3000
        )
        meta = MetadataWatch(bootstrap, clients)
        producer.start()
        meta.start()
        faults: list[Fault] = []
        problems: list[str] = []
        try:
            t = time.monotonic()
            wait_for(lambda: full_isrs(meta, t), 60, "full ISRs", step=0.5)
            wait_for(
                lambda: all(producer.refresh().deliveries[p] for p in range(PARTITIONS)),
                60,
                "acks=all writes acknowledged on every partition",
                step=0.5,
            )
            for r in range(ROUNDS):
                controller = active_controller(fc)
                node, direction, cut_s = plan(fc, r, controller)
                fc.isolate(node, direction)
                t_cut = time.monotonic()
                time.sleep(cut_s)
                fc.rejoin(node)
                fault = Fault(node, direction, node == controller, t_cut, time.monotonic())
                faults.append(fault)
                time.sleep(SETTLE_S)
                with contextlib.suppress(AssertionError):  # a longer stall is measured below
                    wait_for(lambda t=fault.t_heal: acked_since(producer, t), 60, "acks", step=0.2)  # type: ignore[misc]
                worst, after = measure(producer, fault)
                print(
                    f"round {r}: {fault}: longest stretch without an ack {worst:.2f}s, "
                    f"after the heal {after:.2f}s (seed {SEED})",
                    flush=True,
                )
                cut_s = fault.t_heal - fault.t_cut
                bound = CLIENT_BOUND_S if direction == "in" else RESUME_BOUND_S
                checks = [
                    (worst, OUTAGE_GOAL_S, "session timeout + 2 s", STRICT),
                    (worst, OUTAGE_GOAL_S + OUTAGE_SLACK_S, "the outage goal + slack", True),
                    (after, RESUME_GOAL_S, "resumed within 1 s of the heal", STRICT),
                    (worst, cut_s + bound, "the cut + the resume bound", True),
                    (after, bound, "the resume bound", True),
                ]
                for value, limit, what, enforced in checks:
                    if value > limit:
                        line = f"round {r}: {fault}: {value:.2f}s over {what} ({limit:.1f}s)"
                        print(("" if enforced else "goal missed: ") + line, flush=True)
                        if enforced:
                            problems.append(line)
                since = time.monotonic()
                wait_for(lambda s=since: full_isrs(meta, s), 60, "full ISRs again", step=0.5)  # type: ignore[misc]
        finally:
            producer.stop()
            producer.join(160)
            meta.stop()
            meta.join(40)
        problems += verify(fc, producer, bootstrap)
        print(f"faults:\n{fc.describe()}\nwall time {time.monotonic() - t_start:.0f}s")
        assert not problems, f"seed {SEED}: {len(problems)} problems:\n" + "\n".join(problems)


def verify(fc: FaultCluster, producer: SeqProducerProcess, bootstrap: str) -> list[str]:
    """No acknowledged record lost or duplicated; every replica the same bytes."""
    producer.refresh()
    problems = [f"producer: {e}" for e in producer.fatal[:10]]
    if not producer.acked:
        problems.append("nothing was acknowledged")
    records, unfinished = read_partitions(bootstrap, TOPIC, PARTITIONS, "read_uncommitted")
    problems += [f"could not read {u} to its end" for u in unfinished]
    at: dict[tuple[int, int], int] = {}
    seen: dict[int, int] = {}
    for p, recs in records.items():
        for off, value in recs:
            at[(p, off)] = int(value)
            seen[int(value)] = seen.get(int(value), 0) + 1
    # an ack without an offset (librdkafka's for a retried batch the broker had already) is
    # checked by its value alone
    lost = sorted(
        s
        for s, (p, off) in producer.acked.items()
        if (at.get((p, off)) != s if off is not None else s not in seen)
    )
    print(f"acks without an offset: {sum(off is None for _, off in producer.acked.values())}")
    dups = sorted(s for s, n in seen.items() if n > 1)
    if lost:
        problems.append(f"{len(lost)} acknowledged records lost, e.g. {lost[:10]}")
    if dups:
        problems.append(f"{len(dups)} records duplicated, e.g. {dups[:10]}")

    def diverged() -> list[str]:
        dirs = {n.node_id: n.log_dir for n in fc.nodes}
        return compare_replicas(dirs, {(TOPIC, p): [1, 2, 3] for p in range(PARTITIONS)})

    try:
        wait_for(lambda: not diverged(), 30, "identical replicas", step=1.0)
    except AssertionError:
        problems += diverged()[:20]
    return problems
