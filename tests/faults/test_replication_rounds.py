"""Issue 12's acceptance run: three nodes, a topic of 6 partitions at RF=3 with
min.insync.replicas=2, an idempotent acks=all producer and a transactional
consume-transform-produce app running while each round kills -9 a random node and restarts it.

After the rounds: no acknowledged record lost, none duplicated, nothing from an aborted
transaction visible to read_committed, the app's output exactly once per input record below its
committed offsets, committed group offsets never went backwards, and every replica of every
partition (internal topics too) holds the same batches at the same offsets, byte for byte.
Prints leader failover time p50/p99: from the kill to the producer's next acknowledged record on
each partition the killed node led.

Every stock client (the producer, the app, the offset and metadata watchers, the final reads)
runs in a child process (tests/faults/workload.py): librdkafka crashing during a failover (it
has segfaulted this process) is a client crash, counted and printed, not a test failure.

CI runs 10 rounds. The issue's run::

    KMIRROR_FAULT_ROUNDS=100 python -m pytest tests/faults/test_replication_rounds.py -s

``KMIRROR_FAULT_SEED=<n>`` replays a run's choices (printed at the start and on failure);
``KMIRROR_FAULT_RF=1`` runs the same rounds on unreplicated topics (checks the harness alone).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from tests.waits import wait_for

from .harness import FaultCluster, alive, fault_rounds, fault_seed
from .replicas import compare_replicas, evidence
from .workload import (
    ABORTED,
    EosAppProcess,
    MetadataWatch,
    OffsetWatch,
    SeqProducerProcess,
    create_topics,
    read_partitions,
)

ROUNDS = fault_rounds(10)
SEED = fault_seed()
RF = int(os.environ.get("KMIRROR_FAULT_RF", "3"))
MIN_ISR = 2 if RF >= 3 else 1
PARTITIONS = 6
SRC, DST, GROUP = "numbers", "numbers-doubled", "eos-app"
# Kafka's 9 s session would make every round wait 9 s for the restarted node to re-register.
SESSION = {"broker__session__timeout__ms": "4000", "broker__heartbeat__interval__ms": "1000"}


def cluster_settings() -> dict[str, str]:
    return {
        "default__replication__factor": str(RF),
        "min__insync__replicas": str(MIN_ISR),
        "offsets__topic__replication__factor": str(RF),
        "transaction__state__log__replication__factor": str(RF),
        "transaction__state__log__min__isr": str(MIN_ISR),
        # Rolls, background flushes and recovery checkpoints happen between the kills, so a
        # restart recovers from a recovery point inside a segment, after a snapshot there.
        "log__segment__bytes": "1048576",
        "log__flush__offset__checkpoint__interval__ms": "2000",
        **SESSION,
    }


def led_by(meta: MetadataWatch, node_id: int) -> list[int]:
    snap = meta.latest()
    if snap is None:
        return []
    return [p for (t, p), (leader, _, _) in snap.parts.items() if t == SRC and leader == node_id]


def isr_full(meta: MetadataWatch, since: float) -> bool:
    """Every partition (internal topics too) led, with every replica in its ISR, as metadata
    read after ``since`` says."""
    snap = meta.latest(after=since)
    return (
        snap is not None
        and bool(snap.parts)
        and all(
            leader >= 0 and sorted(isr) == sorted(reps) for leader, reps, isr in snap.parts.values()
        )
    )


def not_full(meta: MetadataWatch) -> str:
    snap = meta.latest()
    if snap is None:
        return "no metadata snapshot"
    short = [
        f"{t}-{p} leader {ld} replicas {reps} isr {isr}"
        for (t, p), (ld, reps, isr) in sorted(snap.parts.items())
        if ld < 0 or sorted(isr) != sorted(reps)
    ]
    return f"{len(short)} partitions short: {short[:8]}"


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


@pytest.mark.timeout(240 + ROUNDS * 45)
def test_replication_survives_kill_rounds(tmp_path: Path) -> None:
    print(f"seed {SEED} rounds {ROUNDS} rf {RF} (replay: KMIRROR_FAULT_SEED={SEED})")
    t_start = time.monotonic()
    with FaultCluster(tmp_path, SEED, **cluster_settings()) as fc:
        rng = fc.rng
        create_topics(fc.bootstrap, [SRC, DST], PARTITIONS, RF, MIN_ISR)
        clients = tmp_path / "clients"
        producer = SeqProducerProcess(fc.bootstrap, SRC, PARTITIONS, clients)
        app = EosAppProcess(fc.bootstrap, SRC, DST, GROUP, rng.randrange(1 << 30), clients)
        watch = OffsetWatch(fc.bootstrap, GROUP, SRC, PARTITIONS, clients)
        meta = MetadataWatch(fc.bootstrap, clients)
        for c in (producer, app, watch, meta):
            c.start()
        problems: list[str] = []
        kills: list[tuple[float, list[int]]] = []
        try:
            wait_for(lambda: app.stats.commits > 0, 90, "the app's first committed transaction")
            for r in range(ROUNDS):
                time.sleep(rng.uniform(1.0, 3.0))
                victim = rng.choice(fc.nodes)
                led = led_by(meta, victim.node_id)
                kills.append((fc.kill(victim), led))
                time.sleep(rng.uniform(0.2, 2.0))
                fc.restart(victim)
                since = time.monotonic()
                try:  # a restarted replica catches up and rejoins every ISR before the next kill
                    wait_for(lambda s=since: isr_full(meta, s), 60, "full ISRs", step=0.5)
                except AssertionError:
                    problems.append(
                        f"round {r}: ISRs not full 60 s after node {victim.node_id} restarted: "
                        f"{not_full(meta)}"
                    )
                print(
                    f"round {r}: node {victim.node_id} (led {SRC} {led}); acked "
                    f"{len(producer.refresh().acked)} commits {app.stats.commits} "
                    f"isr full after {time.monotonic() - since:.1f}s",
                    flush=True,
                )
        finally:
            for c in (producer, app):
                c.stop()
            producer.join(160)
            app.join(130)
        assert all(alive(n) for n in fc.nodes)
        watch.stop()
        watch.join(40)
        try:  # the offsets the app committed last, read after it stopped
            final = watch.read_once()
            watch.refresh().check(final)
        except Exception as e:
            problems.append(f"no committed offsets read after the app stopped: {e}")
            final = {}
        problems += verify(fc, producer, app, watch, meta, final)
        meta.stop()
        meta.join(40)
        producer.refresh()
        times = [
            d - t
            for t, led in kills
            for p in led
            if (d := producer.first_delivery_after(p, t + 0.1)) is not None
        ]
        if times:
            print(
                f"leader failover (kill -> next ack on a partition the node led): "
                f"p50 {percentile(times, 0.5):.2f}s p99 {percentile(times, 0.99):.2f}s "
                f"over {len(times)} partition failovers"
            )
        crashes = producer.crashes + app.crashes + watch.crashes + meta.crashes
        print(
            f"acked {len(producer.acked)} of {producer.sent}, producer errors {len(producer.failed)}; "
            f"app commits {app.stats.commits}, aborts {app.stats.aborts_on_purpose} on purpose "
            f"{app.stats.aborts_on_error} on error, producer restarts "
            f"{app.stats.producer_restarts}; offset readings {watch.reads}; "
            f"client process crashes (no broker failure) {len(crashes)}: {crashes[:5]}; "
            f"wall time {time.monotonic() - t_start:.0f}s"
        )
        assert not problems, f"seed {SEED}: {len(problems)} problems:\n" + "\n".join(problems[:60])


def verify(
    fc: FaultCluster,
    producer: SeqProducerProcess,
    app: EosAppProcess,
    watch: OffsetWatch,
    meta: MetadataWatch,
    committed: dict[int, int],
) -> list[str]:
    producer.refresh()
    problems = [f"producer: {e}" for e in producer.fatal[:10]]
    if app.stats.died:
        problems.append(f"the transactional app stopped: {app.stats.died}")
    if producer.is_alive() or app.is_alive():
        problems.append("the producer or the app did not stop within its bound")
    problems += [f"committed offsets went backwards: {r}" for r in watch.refresh().regressions[:10]]
    if not producer.acked or app.stats.commits == 0 or app.stats.aborts_on_purpose == 0:
        problems.append(
            f"too little load: acked {len(producer.acked)}, commits {app.stats.commits}, "
            f"aborts {app.stats.aborts_on_purpose}"
        )

    # the numbered topic: every acknowledged number at its offset, no number twice
    src, unfinished = read_partitions(fc.bootstrap, SRC, PARTITIONS, "read_uncommitted")
    problems += [f"could not read {u} to its end" for u in unfinished]
    at: dict[tuple[int, int], int] = {}
    seen: dict[int, int] = {}
    for p, recs in src.items():
        for off, value in recs:
            seq = int(value)
            at[(p, off)] = seq
            seen[seq] = seen.get(seq, 0) + 1
    lost = [s for s, where in producer.acked.items() if at.get(where) != s]
    dups = [s for s, n in seen.items() if n > 1]
    if lost:
        problems.append(f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:10]}")
        log_dirs = {n.node_id: n.log_dir for n in fc.nodes}
        for s in sorted(lost)[:5]:
            p, off = producer.acked[s]
            problems.append(
                f"  {s} acked at {SRC}-{p}@{off}; read back {at.get((p, off))}; "
                f"{evidence(log_dirs, SRC, p, off)}"
            )
    if dups:
        problems.append(f"{len(dups)} records duplicated, e.g. {sorted(dups)[:10]}")

    # the app's output, read_committed: nothing aborted, each input once, all below the offsets
    dst, unfinished = read_partitions(fc.bootstrap, DST, PARTITIONS, "read_committed")
    problems += [f"could not read {u} to its end" for u in unfinished]
    outputs: dict[tuple[int, int], int] = {}
    aborted_visible, twice, wrong = 0, 0, 0
    for recs in dst.values():
        for _, value in recs:
            if value.startswith(ABORTED):
                aborted_visible += 1
                continue
            ip, ioff, seq = (int(x) for x in value.split(b":"))
            twice += (ip, ioff) in outputs
            outputs[(ip, ioff)] = seq
            wrong += at.get((ip, ioff)) != seq
    if aborted_visible:
        problems.append(f"{aborted_visible} records of aborted transactions read as committed")
    if twice:
        problems.append(f"{twice} input records transformed twice into committed output")
    if wrong:
        problems.append(f"{wrong} output records do not match the input record they name")
    for p in range(PARTITIONS):
        upto = committed.get(p, -1)
        want = {off for (q, off) in at if q == p and off < upto}
        got = {off for (q, off) in outputs if q == p}
        if want - got:
            problems.append(f"{SRC}-{p}: {len(want - got)} committed inputs with no output")
        if got - want:
            problems.append(
                f"{SRC}-{p}: {len(got - want)} outputs beyond the committed offset {upto}"
            )

    # every replica the same batches at the same offsets (internal topics too)
    def diverged() -> list[str]:
        snap = meta.latest()
        if snap is None:
            return ["no metadata to compare replicas by"]
        assignment = {k: reps for k, (_, reps, _) in snap.parts.items()}
        return compare_replicas({n.node_id: n.log_dir for n in fc.nodes}, assignment)

    try:
        wait_for(lambda: not diverged(), 60, "identical replicas", step=1.0)
    except AssertionError:
        problems += diverged()[:30]
    return problems
