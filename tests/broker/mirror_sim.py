"""A seeded simulation of Cluster Mirroring (KIP-1279) driving the mirror core (issue 28).

One mirrored partition per seed. A modelled source partition (appends, transactions that commit
or abort, leader changes, unclean elections that truncate below what was mirrored, compaction
gaps, retention moving its log start, a control batch the mirror cannot read, the topic deleted
and re-created, outages) and a three-replica destination partition (leader changes, a kill that
loses the unflushed tail, ISR changes, followers copying their leader), with the operator's
add, pause/resume, failover and failback at random moments.

The destination leader runs the same decisions production runs: `core.states.next_state`, the
steps of `core.transitions.plan`, `core.truncation` for every cut and bump, `core.truncation_wait`
for PREPARING's wait and `core.fetch_position` for every Fetch answer; the shell here carries
them out on the model, as `broker.mirror.manager` and the fetchers do on real logs. Cuts go
through `DestPartition` (the model of `replication.Partition`): it fixes the HW itself.

Invariants, after every step (`check`):

- every replica's log is made of batches that existed in the source together (no batch from
  before an unclean truncation beside one from after it), except a tail of local batches (the
  failover marker and writes after it) that no source batch follows;
- the HW never exceeds a replica's log end, and nothing below the leader's HW changes unless
  the step recorded why (an LME, LSO or divergence cut, the source's log start, a restart);
- a STOPPING write carries the latest epoch left in the log; the epoch bump happens on a log
  cut to its last stable offset; the failover marker's epoch is above every mirrored epoch;
- STOPPED is written only once the marker this leader appended is committed (below the HW):
  STOPPED is terminal, so a marker lost with a leader change after it is never written again;
- at the end, with the faults over: a partition wanted MIRRORING is MIRRORING with every ISR
  replica equal to the source from their common log start; a failed-over partition has every
  replica ending at the same offset with a marker, and no committed marker gone; a failback
  fetched only the delta.

``python -m tests.broker.mirror_sim --seeds 10000`` runs many seeds; MIRROR_SEED=N with
test_replay traces one.
"""

from __future__ import annotations

import argparse
import bisect
import random
import sys
import time
from dataclasses import dataclass, field

from broker.metadata.mirror_states import MirrorState, can_transition
from broker.mirror.core import fetch_position, transitions, truncation, truncation_wait
from broker.mirror.core.fetch_position import Verdict
from broker.mirror.core.states import next_state
from broker.mirror.core.transitions import Step

S = MirrorState

# planted-bug switch for the one rule that lives in the model of Partition, not in the core
FIX_HW_ON_CUT = True
# the check made when STOPPED is written (off: the planted marker bug must then be caught by
# the end state alone, proving that check too)
CHECK_MARKER_AT_STOPPED = True


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, message: str, trace: list[str]) -> None:
        self.seed = seed
        super().__init__(
            f"mirror simulation seed {seed}: {message}\n"
            f"replay: MIRROR_SEED={seed} python -m pytest tests/broker/test_mirror_sim.py "
            "-k replay -s\n" + "\n".join(trace[-40:])
        )


@dataclass(frozen=True, slots=True)
class Batch:
    base: int
    count: int
    epoch: int
    kind: str  # data, txn, commit, abort, bad (an unreadable control batch), marker, local
    pid: int
    uid: int  # the content; the same uid at the same offset is the same bytes
    last: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "last", self.base + self.count - 1)

    # the header fields `core.fetch_position` reads
    @property
    def base_offset(self) -> int:
        return self.base

    @property
    def last_offset(self) -> int:
        return self.last

    @property
    def is_control(self) -> bool:
        return self.kind in ("commit", "abort", "bad", "marker")

    @property
    def position(self) -> int:
        return self.base  # one "byte" per offset in the model

    @property
    def size(self) -> int:
        return self.count


def _end(batches: list[Batch], start: int) -> int:
    return batches[-1].last + 1 if batches else start


def _epochs(batches: list[Batch]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for b in batches:
        if not out or b.epoch > out[-1][0]:
            out.append((b.epoch, b.base))
    return out


def _end_for_epoch(batches: list[Batch], start: int, epoch: int) -> tuple[int, int]:
    """Kafka's OffsetForLeaderEpoch: the largest epoch <= ``epoch`` and where it ends."""
    return _cache_end(_epochs(batches), _end(batches, start), epoch)


def _cache_end(eps: list[tuple[int, int]], log_end: int, epoch: int) -> tuple[int, int]:
    found = -1
    for i, (e, _s) in enumerate(eps):
        if e <= epoch:
            found = i
    if found < 0:
        return -1, -1
    nxt = eps[found + 1][1] if found + 1 < len(eps) else log_end
    return eps[found][0], nxt


def _lso(batches: list[Batch], start: int) -> int:
    open_at: dict[int, int] = {}
    for b in batches:
        if b.kind == "txn":
            open_at.setdefault(b.pid, b.base)
        elif b.kind in ("commit", "abort"):
            open_at.pop(b.pid, None)
        elif b.kind == "marker":
            open_at.clear()  # MIRROR_PID_RESET forgets every producer, open transactions too
    return min(open_at.values(), default=_end(batches, start))


# --- the source cluster ----------------------------------------------------------------------


@dataclass
class Source:
    rng: random.Random
    uids: list[int]
    batches: list[Batch] = field(default_factory=list)
    start: int = 0
    epoch: int = 0
    gen: int = 0  # moves on every unclean truncation and re-creation
    born: dict[int, int] = field(default_factory=dict)  # uid -> generation it appeared in
    died: dict[int, int] = field(default_factory=dict)  # uid -> generation it was cut in
    open_txns: set[int] = field(default_factory=set)
    down: int = 0  # steps of outage left
    deleted: bool = False
    compacted: set[int] = field(default_factory=set)
    confirmed_lme: int | None = None  # what it mirrored back from the destination (failback)
    # its leader epoch cache: (epoch, start offset); compaction leaves it alone
    cache: list[tuple[int, int]] = field(default_factory=list)

    @property
    def end(self) -> int:
        return _end(self.batches, self.start)

    def _new_uid(self) -> int:
        self.uids[0] += 1
        return self.uids[0]

    def _add(self, count: int, kind: str, pid: int = -1) -> None:
        uid = self._new_uid()
        if not self.cache or self.epoch > self.cache[-1][0]:
            self.cache.append((self.epoch, self.end))
        self.batches.append(Batch(self.end, count, self.epoch, kind, pid, uid))
        self.born[uid] = self.gen

    def append(self) -> str:
        r = self.rng.random()
        if r < 0.15 and len(self.open_txns) < 2:
            pid = self.rng.randrange(1, 50)
            if pid not in self.open_txns:
                self.open_txns.add(pid)
                self._add(self.rng.randint(1, 3), "txn", pid)
                return f"src txn {pid} opens"
        if r < 0.35 and self.open_txns:
            pid = self.rng.choice(sorted(self.open_txns))
            if self.rng.random() < 0.5:
                self._add(self.rng.randint(1, 2), "txn", pid)
                return f"src txn {pid} appends"
            self.open_txns.discard(pid)
            kind = "commit" if self.rng.random() < 0.6 else "abort"
            self._add(1, kind, pid)
            return f"src txn {pid} {kind}"
        self._add(self.rng.randint(1, 4), "data")
        return f"src append -> {self.end}"

    def leader_change(self) -> str:
        self.epoch += 1
        return f"src leader change: epoch {self.epoch}"

    def unclean_election(self, below: int) -> str:
        """A replica missing the tail becomes leader: the log is cut, the epoch moves on."""
        hi = max(self.start, self.end - 1)
        cut = self.rng.randint(min(hi, max(self.start, below - 6)), hi)
        dropped = [b for b in self.batches if b.last >= cut]
        if not dropped:
            return "src unclean election (nothing lost)"
        keep = [b for b in self.batches if b.last < cut]
        self.cache = [(e, s) for e, s in self.cache if s < _end(keep, self.start)]
        self.gen += 1
        for b in dropped:
            self.died[b.uid] = self.gen
        self.batches = keep
        self.open_txns = {b.pid for b in keep if b.kind == "txn"} - {
            b.pid for b in keep if b.kind in ("commit", "abort")
        }
        self.epoch += 1
        return f"src UNCLEAN election: cut to {self.end} (gen {self.gen}), epoch {self.epoch}"

    def compact(self) -> str:
        """Compaction removes whole data batches below the LSO: gaps in the offsets."""
        lso = _lso(self.batches, self.start)
        cands = [b for b in self.batches[:-1] if b.kind == "data" and b.last < lso]
        if not cands:
            return "src compaction: nothing"
        gone = self.rng.choice(cands)
        self.batches = [b for b in self.batches if b is not gone]
        self.compacted.add(gone.uid)
        return f"src compaction removed {gone.base}..{gone.last}"

    def retention(self) -> str:
        """DeleteRecords / retention: the log start moves up (whole batches go)."""
        if len(self.batches) < 3:
            return "src retention: nothing"
        new_start = self.batches[self.rng.randrange(1, len(self.batches) - 1)].base
        self.batches = [b for b in self.batches if b.base >= new_start]
        self.start = new_start
        below = [(e, s) for e, s in self.cache if s <= new_start]
        above = [(e, s) for e, s in self.cache if s > new_start]
        self.cache = ([(below[-1][0], new_start)] if below else []) + above
        return f"src log start -> {new_start}"

    def bad_control(self) -> str:
        self._add(1, "bad")
        return "src appends a control batch the mirror cannot read"

    def recreate(self) -> str:
        """The topic deleted and created again: a new topic id; the mirror, which fetches by
        topic id, is refused from then on (parked), and its copy stays as it was."""
        self.deleted = True
        return "src topic deleted and re-created"

    # what the mirror asks of it
    def available(self) -> bool:
        return self.down == 0 and not self.deleted

    def fetch(self, offset: int, last_epoch: int) -> tuple[int, int, int, list[Batch]]:
        """(error, diverging epoch, diverging end, batches)."""
        if not self.available():
            return 6, -1, -1, []
        if offset < self.start or offset > self.end:
            return fetch_position.OFFSET_OUT_OF_RANGE, -1, -1, []
        if last_epoch >= 0:
            epoch, end = _cache_end(self.cache, self.end, last_epoch)
            if epoch < 0:  # older than every epoch it keeps: Kafka answers OUT_OF_RANGE
                return fetch_position.OFFSET_OUT_OF_RANGE, -1, -1, []
            if epoch < last_epoch or end < offset:
                return 0, epoch, end, []
        out = [b for b in self.batches if b.last >= offset]
        n = self.rng.randint(1, 6)
        return 0, -1, -1, out[:n]

    def offset_for_leader_epoch(self, epoch: int) -> tuple[int, int]:
        return _cache_end(self.cache, self.end, epoch)


# --- the destination cluster ------------------------------------------------------------------


@dataclass
class Replica:
    id: int
    batches: list[Batch] = field(default_factory=list)
    start: int = 0
    hw: int = 0
    flushed: int = 0  # batches on disk
    alive: bool = True
    fetched_at: int = -1  # the step of its last fetch from the leader
    acked: int = 0  # as a follower: how far its log is known to match the leader's

    @property
    def end(self) -> int:
        return _end(self.batches, self.start)

    @property
    def latest_epoch(self) -> int:
        return self.batches[-1].epoch if self.batches else -1


class DestPartition:
    """The model of `replication.Partition` on the destination leader: every change of the
    leader's log goes through here, and a cut brings the HW down with the log end."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    @property
    def leader(self) -> Replica:
        return self.sim.replicas[self.sim.leader]

    def truncate_to(self, offset: int, why: str) -> None:
        r = self.leader
        r.batches = [b for b in r.batches if b.last < offset]
        self.sim.unack(_end(r.batches, r.start))
        if not r.batches:
            r.start = min(r.start, offset)
        r.flushed = min(r.flushed, len(r.batches))
        if FIX_HW_ON_CUT:
            r.hw = min(r.hw, r.end)
        self.sim.cut_reason = why

    def truncate_fully_and_start_at(self, offset: int, why: str) -> None:
        r = self.leader
        self.sim.unack(offset)
        r.batches, r.start, r.flushed = [], offset, 0
        if FIX_HW_ON_CUT:
            r.hw = offset
        else:
            r.hw = max(r.hw, offset)
        self.sim.cut_reason = why

    def cut_at(self, offset: int, why: str) -> None:
        if offset <= self.leader.start:
            self.truncate_fully_and_start_at(offset, why)
        else:
            self.truncate_to(offset, why)

    def delete_records_before(self, offset: int) -> None:
        r = self.leader
        r.batches = [b for b in r.batches if b.last >= offset]
        r.start = offset
        r.flushed = min(r.flushed, len(r.batches))
        self.sim.cut_reason = "log start followed"

    def append(self, batches: list[Batch]) -> None:
        r = self.leader
        for b in batches:
            if b.base < r.end:
                raise SimulationFailure(self.sim.seed, f"append of {b} below {r.end}", [])
            r.batches.append(b)
        self.sim.advance_hw()


@dataclass
class Info:
    """What the leader's manager remembers (lost when leadership moves)."""

    state: MirrorState
    wait_since: float | None = None
    aligned_step: int = -1
    bump_started: bool = False
    marker: Batch | None = None  # appended by this leader, not yet seen committed


class Simulation:
    def __init__(self, seed: int, trace: bool = False, steps: int = 220) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.print = trace
        self.steps = steps
        self.trace: list[str] = []
        self.source = Source(random.Random(seed ^ 0x5EED), [0])
        self.replicas = {i: Replica(i) for i in (1, 2, 3)}
        self.leader = 1
        self.isr = {1, 2, 3}
        self.dest_epoch = 0  # the destination partition's own leader epoch
        self.part = DestPartition(self)
        self.wanted: MirrorState | None = None  # from mirror.name; None: not mirrored
        self.persisted = S.UNKNOWN  # the mirror coordinator's state
        self.persisted_lme: int | None = None
        self.info: Info | None = None
        self.fetching = False
        self.step_no = 0
        self.cut_reason: str | None = None
        self.failed_over = False  # failover done, local writes allowed
        self.failback_floor = -1  # failback: offsets below this must not be fetched again
        self.failback_gen = -1
        self.fetched_below_floor = 0
        self.committed_markers: set[int] = set()
        self.prepared_at = -10  # the step PREPARING last left for MIRRORING
        self.committed_marker: Batch | None = None  # seen committed by AWAIT_MARKER
        self.checked: dict[int, tuple[int, int, int, int]] = {}  # replica -> log checked
        self.lso_cut_end = -1  # where STOPPING's LSO cut left the log end
        self.stats = {
            "appended": 0, "cuts": 0, "failovers": 0, "failbacks": 0, "failed": 0,
            "lme_cuts": 0, "lso_cuts": 0, "source_truncations": 0, "marker_waits": 0,
            "stopping_redone": 0,
        }  # fmt: skip
        for _ in range(self.rng.randint(0, 8)):
            self.source.append()

    def log(self, msg: str) -> None:
        line = f"[{self.step_no}] {msg}"
        self.trace.append(line)
        if self.print:
            print(line)

    def fail(self, msg: str) -> None:
        raise SimulationFailure(self.seed, msg, self.trace)

    # --- the destination's replication (a correct model of what replication does) -----------

    def advance_hw(self) -> None:
        lead = self.replicas[self.leader]
        ends = [
            self.replicas[r].acked for r in self.isr if self.replicas[r].alive and r != self.leader
        ]
        if lead.alive:
            lead.hw = max(lead.hw, min([*ends, lead.end]))

    def follower_fetch(self, rid: int) -> None:
        f, lead = self.replicas[rid], self.replicas[self.leader]
        if not (f.alive and lead.alive) or rid == self.leader:
            return
        common = 0
        for a, b in zip(f.batches, lead.batches, strict=False):
            if a is not b:  # batches are shared objects: the same content is the same object
                break
            common += 1
        if f.start != lead.start or (
            common < len(f.batches) and f.batches[common].base < lead.start
        ):
            f.batches, f.start = [b for b in lead.batches], lead.start
            f.flushed = 0
        else:
            f.batches = f.batches[:common] + lead.batches[common:]
            f.flushed = min(f.flushed, common)
        f.fetched_at = self.step_no
        f.acked = f.end
        if rid not in self.isr and f.end == lead.end:
            self.isr.add(rid)
        self.advance_hw()
        f.hw = min(lead.hw, f.end)

    def unack(self, offset: int) -> None:
        """The leader's log is cut at ``offset``: what followers hold past it no longer counts."""
        for r in self.replicas.values():
            r.acked = min(r.acked, offset)

    def flush(self) -> None:
        for r in self.replicas.values():
            r.flushed = len(r.batches)

    def kill(self, rid: int) -> None:
        """Crash: the unflushed tail is lost; it leaves the ISR; a leader is replaced."""
        others = [r for r in self.isr if r != rid and self.replicas[r].alive]
        lead = self.replicas[self.leader]
        if rid == self.leader and not any(self.replicas[r].acked >= lead.hw for r in others):
            return  # would lose committed data: not a clean failure
        r = self.replicas[rid]
        r.alive = False
        r.batches = r.batches[: r.flushed]
        r.hw = min(r.hw, r.end)
        r.acked = min(r.acked, r.end)
        self.isr.discard(rid)
        self.log(f"dest kill {rid}: log now ends {r.end}")
        if rid == self.leader:
            self.elect([o for o in others if self.replicas[o].acked >= lead.hw])

    def elect(self, candidates: list[int]) -> None:
        if not candidates:
            return
        old_hw = self.replicas[self.leader].hw
        self.leader = self.rng.choice(sorted(candidates))
        self.dest_epoch += 1
        new = self.replicas[self.leader]
        new.hw = max(new.hw, min(old_hw, new.end))
        for r in self.replicas.values():
            r.acked = 0 if r is not new else r.end  # followers prove their logs again
        self.info = None  # the new leader reads the state from the coordinator
        self.fetching = False
        self.log(f"dest leader -> {self.leader} (epoch {self.dest_epoch}, end {new.end})")

    def restart(self, rid: int) -> None:
        r = self.replicas[rid]
        if not r.alive:
            r.alive = True
            self.log(f"dest restart {rid}")

    # --- the mirror, on the destination leader: the core's decisions carried out --------------

    def write_state(self, new: MirrorState, lme: int | None = None) -> None:
        if self.persisted != new and not can_transition(self.persisted, new):
            self.fail(f"invalid transition {self.persisted.name} -> {new.name}")
        if new == S.STOPPED and CHECK_MARKER_AT_STOPPED:
            lead = self.replicas[self.leader]
            m, self.committed_marker = self.committed_marker, None
            if m is None or m not in lead.batches or m.last >= lead.hw:
                self.fail(f"STOPPED written before the marker {m} was committed (HW {lead.hw})")
        if new == S.STOPPING:
            latest = self.replicas[self.leader].latest_epoch
            if lme != (latest if latest >= 0 else None):
                self.fail(f"STOPPING written with LME {lme}, the log's latest epoch is {latest}")
            self.persisted_lme = lme
        if self.persisted == S.PREPARING and new == S.MIRRORING:
            self.prepared_at = self.step_no
        self.persisted = new
        assert self.info is not None
        self.info.state = new
        self.info.wait_since = None  # a later PREPARING waits afresh
        self.log(f"mirror state -> {new.name}")

    def reconcile(self) -> None:
        lead = self.replicas[self.leader]
        if self.wanted is None or not lead.alive:
            return
        if self.info is None:
            self.info = Info(self.persisted)
        for _ in range(16):
            info = self.info
            nxt = next_state(info.state, self.wanted)
            if nxt is None:
                break
            before = info.state
            self.enter(info, nxt)
            if info.state == before:
                return
        if self.info.state == S.MIRRORING and self.wanted == S.MIRRORING:
            self.fetching = True

    def enter(self, info: Info, new: MirrorState) -> None:
        lead = self.replicas[self.leader]
        steps = transitions.plan(
            info.state,
            new,
            self.wanted or new,
            bump_started=info.bump_started,
            marker_pending=info.marker is not None and info.marker in lead.batches,
        )
        lme: int | None = None
        for step in steps:
            if step == Step.CHECK_SOURCE:
                if not self.source.available():
                    return
            elif step == Step.LME_TRUNCATE:
                if not self.source.available():
                    return  # the align failed: PREPARING again later
                info.aligned_step = self.step_no
                confirmed = self.source.confirmed_lme
                cut = truncation.lme_truncation(
                    _epochs(lead.batches), lead.start, lead.end, confirmed
                )
                if cut is not None:
                    self.part.cut_at(cut[0], "LME truncation")
                    self.log(f"LME cut at {cut[0]} (confirmed {confirmed})")
                    self.stats["lme_cuts"] += 1
            elif step == Step.AWAIT_REPLICAS:
                # one attempt waits a while (production: up to 5 s, polling): the followers
                # fetch meanwhile, or some do not
                self.step_no += 1
                for rid in (1, 2, 3):
                    if self.rng.random() < 0.7:
                        self.follower_fetch(rid)
                behind = [
                    r for r in sorted(self.isr)
                    if r != self.leader and self.replicas[r].fetched_at <= info.aligned_step
                ]  # fmt: skip
                outcome, info.wait_since, _ = truncation_wait.attempt(
                    info.wait_since,
                    float(self.step_no),
                    behind,
                    under_min_isr=len(self.isr) < 2,
                    timeout_s=40.0,
                )
                if outcome == truncation_wait.Outcome.FAILED:
                    self.write_state(S.FAILED)
                    self.stats["failed"] += 1
                    return
                if outcome != truncation_wait.Outcome.TRUNCATED:
                    return
            elif step == Step.STOP_FETCHER:
                self.fetching = False
            elif step == Step.LSO_TRUNCATE:
                # the log's LSO: min(HW, the first unstable offset), as production reads it
                lso = min(lead.hw, _lso(lead.batches, lead.start))
                lso_cut = truncation.lso_cut(lead.end, lso)
                if lso_cut is not None:
                    self.part.truncate_to(lso_cut, "LSO truncation")
                    self.log(f"LSO cut at {lso_cut}")
                    self.stats["lso_cuts"] += 1
                self.lso_cut_end = lead.end
            elif step == Step.START_BUMP:
                latest = lead.latest_epoch
                lme = latest if latest >= 0 else None
                self.bump(lme)
                info.bump_started = True
            elif step == Step.RECORD_LME:
                self.stats["stopping_redone"] += 1  # a restart or a new leader in STOPPING
                if self.persisted_lme is None and lead.latest_epoch >= 0:
                    self.persisted_lme = lead.latest_epoch
            elif step == Step.FINISH_BUMP:
                if not info.bump_started and truncation.needs_bump(
                    self.persisted_lme, self.dest_epoch
                ):
                    self.bump(self.persisted_lme)
                info.bump_started = False
            elif step == Step.APPEND_MARKER:
                mirrored = max((b.epoch for b in lead.batches if b.kind != "local"), default=-1)
                if self.dest_epoch <= mirrored and not self.failed_over:
                    self.fail(f"marker epoch {self.dest_epoch} not above mirrored {mirrored}")
                info.marker = Batch(lead.end, 1, self.dest_epoch, "marker", -1, self.local_uid())
                self.part.append([info.marker])
                self.log(f"marker appended at {info.marker.base} (HW {lead.hw})")
            elif step == Step.AWAIT_MARKER:
                # one attempt waits a while (production: up to 5 s): the followers fetch
                # meanwhile, or some do not, and the HW passes the marker or not
                self.step_no += 1
                for rid in (1, 2, 3):
                    if self.rng.random() < 0.7:
                        self.follower_fetch(rid)
                if info.marker is None or info.marker.last >= lead.hw:
                    self.log("marker not committed yet: STOPPING stays")
                    self.stats["marker_waits"] += 1
                    return
                self.committed_marker = info.marker
                info.marker = None
            elif step == Step.WRITE_STATE:
                self.write_state(new, lme)
            elif step == Step.START_FETCHER:
                self.fetching = True
            elif step == Step.CLEAR_NAME:
                self.wanted = None
                self.failed_over = True
                self.stats["failovers"] += 1
                self.log("failover done: mirror.name cleared")

    def local_uid(self) -> int:
        self.source.uids[0] += 1
        return -self.source.uids[0]  # negative: never a source batch

    def bump(self, lme: int | None) -> None:
        lead = self.replicas[self.leader]
        if self.lso_cut_end != lead.end:
            lso = min(lead.hw, _lso(lead.batches, lead.start))
            if lead.end > lso:
                self.fail(f"epoch bump with records past the LSO ({lso} < end {lead.end})")
        target = truncation.bump_target(lme, self.dest_epoch)
        self.dest_epoch = max(self.dest_epoch, target)
        self.log(f"epoch bump -> {self.dest_epoch}")

    def mirror_fetch(self) -> None:
        lead = self.replicas[self.leader]
        if not (self.fetching and lead.alive and self.info and self.info.state == S.MIRRORING):
            return
        offset = lead.end
        code, dep, dend, got = self.source.fetch(offset, lead.latest_epoch)
        decided = fetch_position.verdict(code, dep, lead.end, offset)
        if decided == Verdict.PARK:
            return
        if decided == Verdict.RECONCILE:
            self.realign(code, dep, dend)
            return
        if decided == Verdict.REFETCH:
            return
        if not got:
            return
        plan = fetch_position.plan_append(
            got, lead.end, lead.start, self.rng.choice([2, 5, 100]),
            lambda b: "unreadable control batch" if b.kind == "bad" else None,
        )  # fmt: skip
        if plan.cut_to >= 0:
            if plan.restart:
                self.part.truncate_fully_and_start_at(plan.cut_to, "batch straddles the end")
            else:
                self.part.truncate_to(plan.cut_to, "batch straddles the end")
        batches = [
            b for b in got if plan.chunks and plan.chunks[0][0] <= b.position < plan.chunks[-1][1]
        ]
        if batches:
            if batches[0].base < self.failback_floor:
                self.fetched_below_floor += 1
            self.part.append(batches)
            self.stats["appended"] += len(batches)
        if plan.refused is not None:
            self.log(f"mirror FAILED: {plan.refused}")
            self.fetching = False
            self.write_state(S.FAILED)
            self.stats["failed"] += 1
            return
        start = fetch_position.follow_log_start(lead.start, lead.hw, self.source.start)
        if start is not None:
            self.part.delete_records_before(start)

    def realign(self, code: int, dep: int, dend: int) -> None:
        lead = self.replicas[self.leader]
        src = self.source
        if code == fetch_position.OFFSET_OUT_OF_RANGE:
            decided = truncation.out_of_range(
                lead.end, lead.latest_epoch if lead.batches else None, src.start, src.end
            )
            if decided.restart_at is not None:
                self.part.truncate_fully_and_start_at(decided.restart_at, "below the source start")
                self.stats["cuts"] += 1
                return
            if decided.diverged_epoch is None:
                return
            dep, dend, fallback = decided.diverged_epoch, -1, decided.fallback
        else:
            fallback = -1
        if dend < 0 and dep >= 0:
            dep, dend = src.offset_for_leader_epoch(dep)
        ours = _end_for_epoch(lead.batches, lead.start, dep) if dep >= 0 else (-1, -1)
        if ours[0] != dep:
            ours = (-1, -1)
        target = truncation.divergence_target(lead.end, dep, dend, ours, fallback=fallback)
        if target is None:
            return
        if truncation.restart(target, lead.start):
            self.part.truncate_fully_and_start_at(target, "diverged from the source")
        else:
            self.part.truncate_to(target, "diverged from the source")
        self.stats["cuts"] += 1
        self.log(f"realigned with the source: cut to {target}")

    # --- the operator --------------------------------------------------------------------------

    def operator(self) -> None:
        r = self.rng.random()
        if self.wanted is None and not self.failed_over and self.persisted == S.UNKNOWN:
            self.wanted = S.MIRRORING
            self.log("--add")
        elif self.wanted == S.MIRRORING and r < 0.3:
            self.wanted = S.PAUSED
            self.log("--pause")
        elif self.wanted == S.PAUSED and r < 0.6:
            self.wanted = S.MIRRORING
            self.log("--resume")
        elif self.wanted in (S.MIRRORING, S.PAUSED) and r > 0.75:
            self.wanted = S.STOPPED
            self.log("--failover")
        elif self.persisted == S.FAILED and r < 0.5:
            self.wanted = S.STOPPED
            self.log("--remove (recovering a FAILED partition)")
        elif self.failed_over and self.wanted is None and r < 0.4:
            self.failback()

    def failback(self) -> None:
        """The source mirrored our writes back (or never did), then the partition is added to
        the mirror again: PREPARING's LME truncation keeps what the source confirms."""
        lead = self.replicas[self.leader]
        src = self.source
        if src.deleted:
            return
        if self.rng.random() < 0.6 and lead.batches:
            # the source copied our log up to some point and moved on in a higher epoch
            upto = self.rng.randint(0, len(lead.batches))
            src.gen += 1
            for b in src.batches:
                src.died[b.uid] = src.gen
            src.batches = list(lead.batches[:upto])
            src.start = lead.start
            src.cache = _epochs(src.batches)
            for b in src.batches:
                src.born.setdefault(b.uid, src.gen)
                src.died.pop(b.uid, None)
                src.compacted.discard(b.uid)
            src.open_txns = set()
            src.confirmed_lme = max((b.epoch for b in src.batches), default=-1)
            if src.confirmed_lme < 0:
                src.confirmed_lme = None
            src.epoch = max(src.epoch, self.dest_epoch) + 1
            self.failback_floor = src.end
            self.failback_gen = src.gen  # a later unclean election may cut below it        else:
            src.confirmed_lme = None
            self.failback_floor = -1
        self.failed_over = False
        self.fetched_below_floor = 0
        self.committed_markers.clear()
        self.wanted = S.MIRRORING
        self.stats["failbacks"] += 1
        self.log(f"--add (failback; the source confirms epoch {src.confirmed_lme})")

    # --- the run -------------------------------------------------------------------------------

    def step(self, faults: bool) -> None:
        self.step_no += 1
        self.cut_reason = None
        before = self.snapshot()
        rng = self.rng
        src = self.source
        if src.down:
            src.down -= 1
        r = rng.random()
        if r < 0.25:
            self.log(src.append() if not src.deleted else "src gone")
        elif r < 0.29:
            self.log(src.leader_change())
        elif r < 0.31 and faults:
            self.log(src.unclean_election(self.replicas[self.leader].end))
        elif r < 0.33 and faults:
            self.log(src.compact())
        elif r < 0.345 and faults:
            self.log(src.retention())
        elif r < 0.355 and faults:
            src.down = rng.randint(1, 8)
            self.log("src outage")
        elif r < 0.358 and faults:
            self.log(src.bad_control())
        elif r < 0.36 and faults:
            self.log(src.recreate())
        elif r < 0.39 and faults:
            rid = rng.choice([1, 2, 3])
            if self.replicas[rid].alive:
                self.kill(rid)
            else:
                self.restart(rid)
        elif (r < 0.41 or (self.in_a_window() and r < 0.6)) and faults:
            live = [x for x in self.isr if self.replicas[x].alive and x != self.leader]
            lead = self.replicas[self.leader]
            self.elect([x for x in live if self.replicas[x].acked >= lead.hw])
        elif r < 0.43 and faults:
            out = [x for x in self.isr if x != self.leader]
            if out:
                gone = rng.choice(out)
                self.isr.discard(gone)
                self.log(f"dest ISR shrinks: {gone} out")
        elif r < 0.50:
            self.operator()
        elif r < 0.55:
            self.flush()
        elif r < 0.62 and self.failed_over and self.wanted is None:
            lead = self.replicas[self.leader]
            if lead.alive:
                self.part.append(
                    [Batch(lead.end, 2, self.dest_epoch, "local", -1, self.local_uid())]
                )
                self.log("local produce after failover")
        if rng.random() < 0.6:
            self.mirror_fetch()
        for rid in (1, 2, 3):
            if rng.random() < 0.4:
                self.follower_fetch(rid)
        self.reconcile()
        self.check(before)

    def in_a_window(self) -> bool:
        """Where a leader change is what the core must survive, so the seeds make it often: in
        the middle of a failover (the marker appended or not, committed or not), and just
        after PREPARING left for MIRRORING (the followers may still hold what it cut)."""
        return self.persisted == S.STOPPING or self.step_no - self.prepared_at <= 2

    def snapshot(self) -> tuple[int, list[Batch], int]:
        lead = self.replicas[self.leader]
        return self.leader, list(lead.batches), lead.hw

    def check(self, before: tuple[int, list[Batch], int]) -> None:
        src = self.source
        for r in self.replicas.values():
            if r.hw > r.end:
                self.fail(f"replica {r.id}: HW {r.hw} past its log end {r.end}")
            key = (len(r.batches), r.batches[-1].uid if r.batches else 0, r.start, src.gen)
            if self.checked.get(r.id) != key:  # the log (or the source's history) moved
                self.check_log(r)
                self.checked[r.id] = key
        leader, old, old_hw = before
        lead = self.replicas[self.leader]
        if self.failed_over:  # the failover's markers (a failback may cut them again)
            self.committed_markers.update(
                b.uid for b in lead.batches if b.kind == "marker" and b.last < lead.hw
            )
        if leader == self.leader and self.cut_reason is None:
            # nothing below the HW changes without a recorded cut
            # batches are shared objects and logs change only at their ends: the prefix below
            # the HW is unchanged when its last batch is still the same object in its place
            k = bisect.bisect_left(old, min(old_hw, lead.hw), key=lambda b: b.last)
            now = lead.batches
            if k and (k > len(now) or now[k - 1] is not old[k - 1]):
                self.fail(f"records below the HW {old_hw} changed without a cut")

    def check_log(self, r: Replica) -> None:
        src = self.source
        seen_local = False
        lo_died, hi_born = 1 << 30, -1
        for b in r.batches:
            if b.uid < 0 and b.uid not in src.born:
                seen_local = True
                continue
            if b.uid not in src.born:
                self.fail(f"replica {r.id}: batch {b} never existed in the source")
            if seen_local:
                self.fail(f"replica {r.id}: source batch {b} after local batches")
            hi_born = max(hi_born, src.born[b.uid])
            if b.uid in src.died:
                lo_died = min(lo_died, src.died[b.uid])
            if hi_born >= lo_died:
                self.fail(
                    f"replica {r.id}: batch {b} (source generation {src.born[b.uid]}) beside "
                    f"a batch cut in generation {lo_died}: appended past a divergence"
                )

    def quiesce(self) -> None:
        """The faults end: everything restarts, the source is reachable, replication and
        mirroring run until nothing moves; then the end-state invariants."""
        src = self.source
        src.down = 0
        for rid in (1, 2, 3):
            self.restart(rid)
        for _ in range(60):
            self.step_no += 1
            self.cut_reason = None
            before = self.snapshot()
            self.mirror_fetch()
            for rid in (1, 2, 3):
                self.follower_fetch(rid)
            self.reconcile()
            self.check(before)
        lead = self.replicas[self.leader]
        isr = [self.replicas[x] for x in sorted(self.isr)]
        state = self.info.state if self.info else self.persisted
        if self.wanted == S.MIRRORING and state == S.MIRRORING and not src.deleted:
            start = max(lead.start, src.start)
            # compaction at the source after we copied a batch does not remove ours
            ours = [b for b in lead.batches if b.base >= start and b.uid not in src.compacted]
            theirs = [b for b in src.batches if b.base >= start]
            if ours != theirs:
                self.fail(f"mirroring at rest: destination {ours[-3:]} != source {theirs[-3:]}")
            if (
                self.failback_floor >= 0
                and self.fetched_below_floor
                and src.gen == self.failback_gen
            ):
                self.fail(f"failback fetched again below {self.failback_floor}")
        if self.failed_over:
            ends = {r.end for r in isr}
            if len(ends) != 1:
                self.fail(f"after failover the ISR replicas end at different offsets {ends}")
            markers = {b.uid for b in lead.batches if b.kind == "marker"}
            if self.committed_markers - markers:
                self.fail("a committed MIRROR_PID_RESET marker is gone")
            if not markers:
                self.fail("failed over without a MIRROR_PID_RESET marker in the leader's log")
            tail_ok = any(b.kind == "marker" for b in lead.batches if b.uid not in src.born)
            if not tail_ok:
                self.fail("failed over without a marker of its own (only mirrored ones)")
            for r in self.replicas.values():
                start = max(r.start, lead.start)
                mine = [b for b in r.batches if b.base >= start]
                if r.end != lead.end or mine != [b for b in lead.batches if b.base >= start]:
                    self.fail(
                        f"after failover replica {r.id} (ending at {r.end}) differs from the "
                        f"leader {lead.id} (ending at {lead.end})"
                    )
        for r in isr:
            if r.batches[: len(lead.batches)] != lead.batches[: len(r.batches)]:
                self.fail(f"ISR replica {r.id} differs from the leader at rest")

    def run(self) -> dict[str, int]:
        try:
            for _ in range(self.steps):
                self.step(faults=True)
            self.quiesce()
        except SimulationFailure:
            raise
        except Exception as e:  # a crash of the model or the core is a failure of the seed
            raise SimulationFailure(self.seed, f"{type(e).__name__}: {e}", self.trace) from e
        return self.stats


def run_seed(seed: int, trace: bool = False) -> dict[str, int]:
    return Simulation(seed, trace=trace).run()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=2000)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    failed = 0
    for seed in range(args.start, args.start + args.seeds):
        try:
            run_seed(seed)
        except SimulationFailure as e:
            failed += 1
            print(e, file=sys.stderr)
    dt = time.monotonic() - t0
    print(f"{args.seeds} seeds, {failed} failed, {args.seeds / dt:.0f} seeds/s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
