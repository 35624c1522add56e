"""A seeded, deterministic simulation of the KRaft core (broker/raft/core.py).

One ``random.Random(seed)`` drives everything: the cluster shape (1, 3 or 5 voters plus 0-2
observers), the Raft config (fetch sizes, snapshot chunks and frequency), a fake clock and an
event queue, and the faults:

- the router delays (random latency, hence reorders), drops and duplicates messages;
- partitions split the nodes at random (half the time cutting the leader off) and heal later;
- crashes: ``MemoryLog.crash`` loses unflushed entries, the quorum state survives (an fsynced
  file). Half the random crashes hit the leader, and "targeted" crashes hit a node right after
  it grants a vote, becomes candidate or leader, commits, or appends. A crash breaks the node's
  connections: messages sent to it are lost (a request's sender sees the connection fail, as
  with TCP), messages it sent before dying still arrive;
- clients append unique payloads to whoever leads (the highest epoch);
- pauses (a stalled event loop, SIGSTOP): a node does nothing for a while (half the time the
  leader); what is sent to it waits and arrives, in order, when it runs again, its timers fire
  then too. On resuming, the shell tells the core first (``note_stall``), and a node that still
  leads appends an entry, as the controller appends a NoOpRecord to confirm its leadership.

The "state machine" is the list of committed entries; its snapshot is that list serialized.
After the fault phase the network heals, crashed nodes restart, faults and message loss stop,
and the run settles. Checked after every event:

- at most one leader per epoch, ever;
- each node's high watermark never decreases while it runs. The high watermark is volatile
  (not persisted, as in Kafka): after a crash a node restarts from its log start offset, so
  across restarts the check is on committed data instead, below;
- committed data never changes: every entry any node applies (its log below its high
  watermark, or a snapshot it loads) must equal the global committed prefix at that offset;
- the newest committed entry, and one committed entry sampled at random, are durable (flushed
  in the log, or inside a snapshot) on a majority of voters;
- no payload is committed twice; observers never leave Unattached / Follower;
- Log Matching, over every replica's whole log (uncommitted entries too): two entries with the
  same (offset, epoch) anywhere, ever, have the same content and follow an entry of the same
  epoch. By induction on the offset, two logs holding an entry with the same offset and epoch
  are then identical up to it (below a log's start, its snapshot, checked against the committed
  prefix). Only the entries written since the last step are looked at (``TrackedLog``);
- Leader Completeness, at each election: the new leader's log holds every committed entry;
- a leader resigns within 1.5 x fetch timeout once no majority can have fetched from it
  (check-quorum), and no node busy-loops;
- a leader that confirms its leadership after a pause (``leader_confirmed``: what the
  controller checks before it acts on a timer) was not deposed before it ran again: no node
  was elected in a later epoch by then.

Dynamic quorums (KIP-853, ``Params.dynamic``): the initial voters start from a bootstrap
snapshot holding the Voters record (``kafka-storage.sh format --initial-controllers``), the
spare nodes from none (``--no-initial-controllers``) and find the quorum through bootstrap ids;
at random moments the leader is asked to add a non-voter or remove a voter (itself too). Checked
besides: committed Voters records change the set by at most one voter each, a leader's log holds
at most one uncommitted Voters record, a node outside its own voter set never campaigns, and
committed entries are on enough voters of the current set that every majority holds one.

At the end: a leader is elected (and commits in its epoch) within ``ELECTION_BOUND_MS`` of the
heal, every node catches up to the leader's high watermark, and every log and state machine
equals the committed prefix. Any exception from the core fails the run with its seed.

The clock, the router's fault model, the trace, the seed loop and failure reports come from
``tests/broker/sim_harness.py``.

Entry points:
    RAFT_SEED=1234 python -m pytest tests/broker/test_raft_sim.py -k replay -s (one seed, traced;
                                                           RAFT_DYNAMIC=1 for a KIP-853 seed)
    python -m tests.broker.raft_sim --seeds 100000 --max-seconds 3600           (long run)
    python -m tests.broker.raft_sim --seed 1234 --trace [--dynamic]             (one seed, traced)
"""

import argparse
import random
import struct
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.raft import messages as m
from broker.raft.core import (
    Committed,
    LeaderChange,
    Output,
    RaftConfig,
    RaftCore,
    Send,
    SnapshotLoaded,
    SnapshotWanted,
    VoterChangeDone,
)
from broker.raft.leader_state import LeaderState
from broker.raft.quorum_state import MemoryQuorumStateStore
from broker.raft.replicated_log import MemoryLog
from broker.raft.voter_set import VoterEntry, VoterSet
from protocol.records.kraft_control import encode_kraft_version
from tests.broker.sim_harness import Router, SeededSimulation, SimulationFailure, cli

__all__ = ["Params", "Simulation", "SimulationFailure", "run_seed"]

# After the heal (connected network, no crash, no loss), a leader must be elected and commit in
# its epoch within this much simulated time: a fetch timeout (2 s) to notice, then rounds of
# pre-vote and vote (1-2 s election timeouts, up to 1 s of backoff). It is probabilistic (split
# votes can repeat); over seeds 0-99,999 the worst was 10.4 s.
ELECTION_BOUND_MS = 20_000
SETTLE_MS = 30_000

_ENTRY = struct.Struct(">i?BH")


@dataclass
class Params:
    voters: int
    observers: int
    drop: float
    dup: float
    max_latency: int
    crash_every: int  # mean ms between crashes; 0: none
    partition_every: int  # mean ms between partitions; 0: none
    client_every: int
    snapshot_bytes: int
    targeted: float  # chance to crash a node at a delicate moment (vote granted, elected...)
    fault_ms: int
    dynamic: bool = False  # KIP-853: voters in the log, changed at random moments
    reconfig_every: int = 0  # mean ms between voter change requests (dynamic only)

    @staticmethod
    def from_seed(seed: int, fault_ms: int, dynamic: bool = False) -> "Params":
        r = random.Random(seed ^ 0x5EED)
        p = Params(
            voters=r.choice([1, 3, 3, 5, 5]),
            observers=r.choice([0, 0, 1, 2]),
            drop=r.choice([0.0, 0.01, 0.05, 0.1]),
            dup=r.choice([0.0, 0.02, 0.1]),
            max_latency=r.choice([5, 20, 50, 300]),
            crash_every=r.choice([0, 3000, 1500, 700]),
            partition_every=r.choice([0, 3000, 1500]),
            client_every=r.choice([100, 250, 600]),
            snapshot_bytes=r.choice([1 << 40, 100, 300, 1000]),
            targeted=r.choice([0.0, 0.05, 0.2]),
            fault_ms=fault_ms,
        )
        if dynamic:
            p.dynamic = True
            p.observers = r.choice([1, 2, 2, 3])
            p.voters = r.choice([1, 2, 3, 3, 4, 5])
            p.reconfig_every = r.choice([300, 800, 2000])
        return p


def encode_state(entries: list[m.LogEntry]) -> bytes:
    parts = []
    for e in entries:
        parts.append(_ENTRY.pack(e.epoch, e.control, e.control_type, len(e.payload)))
        parts.append(e.payload)
    return b"".join(parts)


def decode_state(data: bytes) -> list[m.LogEntry]:
    out: list[m.LogEntry] = []
    pos = 0
    while pos < len(data):
        epoch, control, control_type, size = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        out.append(m.LogEntry(len(out), epoch, data[pos : pos + size], control, control_type))
        pos += size
    return out


CLEAN = 1 << 62


class TrackedLog(MemoryLog):
    """A ``MemoryLog`` that tells the Log Matching check where it may hold entries the check has
    not seen: every write that adds entries puts the log on ``changed`` (once) and lowers
    ``unchecked`` to the first offset written. Removals (truncation, a crash, a snapshot) add
    no entry, so need no look."""

    def __init__(self, node_id: int, changed: list["TrackedLog"]) -> None:
        super().__init__()
        self.node_id = node_id
        self.changed = changed
        self.unchecked = CLEAN

    def _mark(self) -> None:
        end = self.end_offset  # a truncation below an earlier mark may come before this write
        if end < self.unchecked:
            if self.unchecked == CLEAN:
                self.changed.append(self)
            self.unchecked = end

    def append_as_leader(self, *args: Any, **kwargs: Any) -> int:
        self._mark()
        return super().append_as_leader(*args, **kwargs)

    def append_as_follower(self, entries: Sequence[m.LogEntry]) -> None:
        self._mark()
        super().append_as_follower(entries)


@dataclass
class Node:
    node_id: int
    voter: bool
    log: TrackedLog
    store: MemoryQuorumStateStore
    core: RaftCore
    up: bool = True
    incarnation: int = 0
    applied: list[m.LogEntry] = field(default_factory=list)
    last_hw: int = 0
    next_tick: int = -1
    same_time_ticks: int = 0
    leader_since: int = -1  # while it leads: when it started
    reach: dict[int, int] = field(default_factory=dict)  # voter -> last time it was reachable
    paused_until: int = -1  # while paused: when it runs again
    pause_leader_epoch: int = -1  # the epoch it led when it last resumed from a pause
    resumed_at: int = -1


class Simulation(SeededSimulation):
    what = "raft simulation"

    def __init__(
        self,
        seed: int,
        fault_ms: int = 8000,
        params: Params | None = None,
        config: RaftConfig | None = None,
        trace: bool = False,
        pause_every: int | None = None,
    ) -> None:
        super().__init__(seed, trace)
        self.p = params or Params.from_seed(seed, fault_ms)
        self.config = config or RaftConfig(
            # one entry per fetch only where round trips are short, or catching up takes minutes
            fetch_max_entries=self.rng.choice([1, 4, 64] if self.p.max_latency <= 50 else [4, 64]),
            snapshot_chunk_bytes=self.rng.choice([100, 4096]),
            max_bytes_between_snapshots=self.p.snapshot_bytes,
        )
        self.voter_ids = frozenset(range(1, self.p.voters + 1))
        ids = sorted(self.voter_ids) + [100 + i for i in range(1, self.p.observers + 1)]
        self.router = Router(self.rng, ids, self.p.max_latency, self.p.drop, self.p.dup)
        self.dirs = {
            nid: uuid.UUID(int=self.rng.getrandbits(128) if self.p.dynamic else 0) for nid in ids
        }
        initial = VoterSet(tuple(VoterEntry(v, self.dirs[v]) for v in sorted(self.voter_ids)))
        self.nodes: dict[int, Node] = {}
        self.changed_logs: list[TrackedLog] = []
        # Log Matching: (offset, epoch) -> (payload, control, control type, the epoch of the
        # entry before it or None if unknown, the node that first held it)
        self.entry_ids: dict[tuple[int, int], tuple[bytes, bool, int, int | None, int]] = {}
        for nid in ids:
            log, store = TrackedLog(nid, self.changed_logs), MemoryQuorumStateStore()
            if self.p.dynamic:
                # kafka-storage.sh format: --initial-controllers on the voters, --no-initial-
                # controllers on the spares (kraft.version 1, no voters)
                control = [(m.KRAFT_VERSION, encode_kraft_version(1))]
                if nid in self.voter_ids:
                    control.append((m.KRAFT_VOTERS, initial.encode()))
                log.bootstrap(tuple(control))
            self.nodes[nid] = Node(
                nid, nid in self.voter_ids, log, store, self._new_core(nid, log, store)
            )
        self.committed_voters: VoterSet | None = initial if self.p.dynamic else None
        self.pending_ops: dict[int, tuple[int, str]] = {}  # node -> (op id, description)
        self.committed: list[m.LogEntry] = []
        self.committed_payloads: set[bytes] = set()
        self.leaders: dict[int, int] = {}
        self.elected_at: dict[int, int] = {}  # epoch -> when its leader was first seen
        self.payload_counter = 0
        self.heal_at = -1
        self.elected_after_heal = -1
        # pauses draw from their own generator: the other faults of a seed stay as they were
        self.pause_rng = random.Random(seed ^ 0x57A11)
        self.pause_every = self.pause_rng.choice([0, 0, 2500, 1200])
        if pause_every is not None:
            self.pause_every = pause_every
        self.stats = {
            "events": 0,
            "pauses": 0,
            "confirmed_after_pause": 0,
            "appends": 0,
            "crashes": 0,
            "partitions": 0,
            "snapshots": 0,
            "installs": 0,
            "voter_changes": 0,
            "voter_changes_refused": 0,
        }

    # --- plumbing ---------------------------------------------------------------------------

    def _new_core(self, nid: int, log: TrackedLog, store: MemoryQuorumStateStore) -> RaftCore:
        rng = random.Random(self.rng.getrandbits(64))
        if self.p.dynamic:
            return RaftCore(
                nid,
                frozenset(),
                log,
                store,
                rng,
                self.config,
                directory_id=self.dirs[nid],
                bootstrap_ids=tuple(sorted(self.voter_ids)),
            )
        return RaftCore(nid, self.voter_ids, log, store, rng, self.config)

    def voters_now(self) -> frozenset[int]:
        """The voters as the newest leader sees them (the static set without KIP-853)."""
        leader = self.current_leader()
        if leader is not None:
            return leader.core.voters
        if self.committed_voters is not None:
            return self.committed_voters.ids
        return self.voter_ids

    @property
    def faults(self) -> bool:
        return self.router.faults

    def replay_command(self) -> str:
        dynamic = " RAFT_DYNAMIC=1" if self.p.dynamic else ""
        return (
            f"RAFT_SEED={self.seed}{dynamic} python -m pytest tests/broker/test_raft_sim.py "
            "-k replay -s"
        )

    # event kinds
    (
        DELIVER,
        TICK,
        CRASH,
        RESTART,
        PARTITION,
        HEAL,
        CLIENT,
        END_FAULTS,
        FAILED,
        RECONFIG,
        PAUSE,
        RESUME,
    ) = range(12)

    # --- running ----------------------------------------------------------------------------

    def run(self) -> dict[str, int]:
        p = self.p
        for node in self.nodes.values():
            self.apply_outputs(node, node.core.start(0))
        self.push(self.rng.randrange(p.client_every), self.CLIENT, None)
        if p.crash_every:
            self.push(self.rng.randrange(2 * p.crash_every), self.CRASH, None)
        if p.partition_every:
            self.push(self.rng.randrange(2 * p.partition_every), self.PARTITION, None)
        if p.dynamic and p.reconfig_every:
            self.push(self.rng.randrange(2 * p.reconfig_every), self.RECONFIG, None)
        if self.pause_every:
            self.push(self.pause_rng.randrange(2 * self.pause_every), self.PAUSE, None)
        self.push(p.fault_ms, self.END_FAULTS, None)
        self.run_events(p.fault_ms + SETTLE_MS)
        self.final_check()
        return self.stats

    def _held(self, kind: int, payload: object) -> bool:
        """An event for a paused node waits until it runs again (after its RESUME, which was
        queued first): True when held."""
        if kind == self.DELIVER:
            nid = payload[2]  # type: ignore[index]
        elif kind in (self.TICK, self.FAILED):
            nid = payload[0]  # type: ignore[index]
        else:
            return False
        node = self.nodes[nid]
        if node.paused_until <= self.now:
            return False
        self.push(node.paused_until, kind, payload)
        return True

    def dispatch(self, kind: int, payload: Any) -> None:
        self.note_reach()
        if self._held(kind, payload):
            return
        if kind == self.PAUSE:
            self.pause()
        elif kind == self.RESUME:
            self.resume(payload)  # type: ignore[arg-type]
        elif kind == self.DELIVER:
            self.deliver(payload)  # type: ignore[arg-type]
        elif kind == self.TICK:
            nid, inc, at = payload
            node = self.nodes[nid]
            if node.up and node.incarnation == inc and node.next_tick == at:
                node.next_tick = -1
                self.apply_outputs(node, node.core.tick(self.now))
        elif kind == self.CLIENT:
            self.client()
        elif kind == self.CRASH:
            self.crash()
        elif kind == self.RESTART:
            self.restart(payload)
        elif kind == self.PARTITION:
            self.partition()
        elif kind == self.HEAL:
            if self.faults:
                self.router.heal()
                self.log("heal")
        elif kind == self.END_FAULTS:
            self.end_faults()
        elif kind == self.RECONFIG:
            self.reconfig()
        elif kind == self.FAILED:
            nid, inc, dest, cid = payload
            node = self.nodes[nid]
            if node.up and node.incarnation == inc:
                self.apply_outputs(node, node.core.request_failed(self.now, dest, cid))

    def schedule_tick(self, node: Node) -> None:
        at = node.core.next_wakeup_ms()
        if at <= self.now:
            node.same_time_ticks += 1
            if node.same_time_ticks > 100:
                self.fail(f"n{node.node_id} busy loop: wants a tick at {at} again and again")
            at = self.now
        else:
            node.same_time_ticks = 0
        if node.next_tick < self.now or at < node.next_tick:
            node.next_tick = at
            self.push(at, self.TICK, (node.node_id, node.incarnation, at))

    def apply_outputs(self, node: Node, outputs: list[Output]) -> None:
        for out in outputs:
            if not node.up:
                return  # crashed while acting on an earlier output
            delicate = False
            if isinstance(out, Send):
                self.route(node, out)
                msg = out.message
                delicate = isinstance(msg, m.VoteResponse) and msg.vote_granted
            elif isinstance(out, Committed):
                self.on_committed(node, out.high_watermark)
                delicate = node.core.is_leader  # just committed: the followers may not know
            elif isinstance(out, LeaderChange):
                self.log(
                    f"n{node.node_id} {node.core.state_name} leader={out.leader_id} epoch={out.epoch}"
                )
                if out.leader_id == node.node_id:
                    self.note_leader(node, out.epoch)
                    if node.core.is_leader and node.core.epoch == out.epoch:  # not Resigned
                        self.check_leader_completeness(node, out.epoch)
                # just elected, or just a candidate (its own vote is in flight)
                delicate = out.leader_id == node.node_id or node.core.state_name == "Candidate"
            elif isinstance(out, SnapshotWanted):
                self.take_snapshot(node)
            elif isinstance(out, SnapshotLoaded):
                self.load_snapshot(node, out.snapshot_id)
            elif isinstance(out, VoterChangeDone):
                op = self.pending_ops.pop(node.node_id, None)
                if op is None or op[0] != out.op_id:
                    self.fail(f"n{node.node_id} answered voter change {out.op_id}, not pending")
                else:
                    self.log(f"n{node.node_id} {op[1]}: error {out.error_code} {out.message}")
            if delicate and self.faults and self.rng.random() < self.p.targeted:
                # a crash between two effects of one step: the later ones never happen
                self.crash_node(node, 10 + self.rng.randrange(1000))
                return
        if node.up:
            self.schedule_tick(node)

    # --- network ----------------------------------------------------------------------------

    def route(self, src: Node, send: Send) -> None:
        dst = self.nodes.get(send.dest)
        if dst is None:
            self.fail(f"n{src.node_id} sent to unknown node {send.dest}")
            return
        for at in self.router.arrivals(self.now):
            self.push(
                at, self.DELIVER, (src.node_id, src.incarnation, dst.node_id, dst.incarnation, send)
            )

    def deliver(self, item: tuple[int, int, int, int, Send]) -> None:
        src_id, src_inc, dst_id, dst_inc, send = item
        dst = self.nodes[dst_id]
        # a restart breaks the receiver's connections: what was sent to the old incarnation is
        # lost (a request's sender sees the connection fail); what a node sent before it
        # crashed is on the wire and still arrives
        if not dst.up or dst.incarnation != dst_inc:
            if isinstance(send.message, m.REQUEST_TYPES):
                at = self.now + self.router.latency()
                self.push(at, self.FAILED, (src_id, src_inc, dst_id, send.correlation_id))
            return
        if not self.router.connected(src_id, dst_id):
            return
        self.apply_outputs(
            dst, dst.core.handle(self.now, src_id, send.correlation_id, send.message)
        )

    # --- faults -----------------------------------------------------------------------------

    def crash(self) -> None:
        if not self.faults:
            return
        up = [n for n in self.nodes.values() if n.up]
        leader = self.current_leader()
        if up:
            # half the time the leader: elections and truncations are where bugs hide
            node = leader if leader is not None and self.rng.random() < 0.5 else self.rng.choice(up)
            self.crash_node(node, 200 + self.rng.randrange(3000))
        self.push(self.now + 1 + self.rng.randrange(2 * self.p.crash_every), self.CRASH, None)

    def pause(self) -> None:
        if not self.faults:
            return
        running = [n for n in self.nodes.values() if n.up and n.paused_until <= self.now]
        leader = self.current_leader()
        if running:
            if leader is not None and leader in running and self.pause_rng.random() < 0.5:
                node = leader
            else:
                node = self.pause_rng.choice(running)
            ms = 100 + self.pause_rng.randrange(6000)
            node.paused_until = self.now + ms
            self.stats["pauses"] += 1
            self.log(f"pause n{node.node_id} for {ms} ms")
            self.push(node.paused_until, self.RESUME, (node.node_id, node.incarnation))
        self.push(self.now + 1 + self.pause_rng.randrange(2 * self.pause_every), self.PAUSE, None)

    def resume(self, item: tuple[int, int]) -> None:
        nid, inc = item
        node = self.nodes[nid]
        if not node.up or node.incarnation != inc or node.paused_until != self.now:
            return
        node.paused_until = -1
        self.log(f"resume n{nid}")
        node.core.note_stall()  # the shell's stall watch speaks first
        node.pause_leader_epoch = node.core.epoch if node.core.is_leader else -1
        node.resumed_at = self.now
        if node.core.is_leader and node.core.confirm_needs_append():
            self.payload_counter += 1
            _, outputs = node.core.append(self.now, [b"payload-%08d" % self.payload_counter])
            self.apply_outputs(node, outputs)
        else:
            self.apply_outputs(node, node.core.tick(self.now))

    def crash_node(self, node: Node, down_ms: int) -> None:
        node.paused_until = -1
        node.up = False
        node.incarnation += 1
        node.log.crash()
        self.stats["crashes"] += 1
        self.log(f"crash n{node.node_id} for {down_ms} ms")
        self.push(self.now + down_ms, self.RESTART, node.node_id)

    def restart(self, nid: int) -> None:
        node = self.nodes[nid]
        if node.up:
            return
        node.up = True
        node.incarnation += 1
        node.core = self._new_core(nid, node.log, node.store)
        snap = node.log.latest_snapshot_id
        node.applied = []
        node.last_hw = 0
        node.next_tick = -1
        node.same_time_ticks = 0
        node.leader_since = -1
        self.log(f"restart n{nid}")
        if snap is not None:
            self.load_snapshot(node, snap)
        self.apply_outputs(node, node.core.start(self.now))

    def partition(self) -> None:
        if not self.faults:
            return
        ids = list(self.nodes)
        leader = self.current_leader()
        if leader is not None and self.rng.random() < 0.5:
            # cut the leader off, alone or with a few others
            group = {nid: int(nid == leader.node_id or self.rng.random() < 0.2) for nid in ids}
        else:
            group = {nid: self.rng.randrange(2) for nid in ids}
        self.router.split(group)
        self.stats["partitions"] += 1
        self.log(
            f"partition {sorted(n for n in ids if group[n])} | {sorted(n for n in ids if not group[n])}"
        )
        self.push(self.now + 300 + self.rng.randrange(4000), self.HEAL, None)
        self.push(
            self.now + 1 + self.rng.randrange(2 * self.p.partition_every), self.PARTITION, None
        )

    def end_faults(self) -> None:
        self.router.heal_for_good()
        for node in self.nodes.values():
            if node.paused_until > self.now:
                node.paused_until = self.now
                self.push(self.now, self.RESUME, (node.node_id, node.incarnation))
        self.heal_at = self.now
        self.log("end of faults: healed, restarting everyone")
        for node in self.nodes.values():
            if not node.up:
                self.restart(node.node_id)

    # --- voter changes (KIP-853) -------------------------------------------------------------

    def reconfig(self) -> None:
        if not self.faults:
            return
        self.push(self.now + 1 + self.rng.randrange(2 * self.p.reconfig_every), self.RECONFIG, None)
        leader = self.current_leader()
        if leader is None:
            return
        core = leader.core
        voters = sorted(core.voters)
        spares = sorted(set(self.nodes) - set(voters))
        r = self.rng
        if spares and (len(voters) == 1 or r.random() < 0.5):
            nid = r.choice(spares)
            what = f"add voter {nid}"
            result = core.add_voter_op(
                self.now, VoterEntry(nid, self.dirs[nid]), 500 + r.randrange(3000)
            )
        else:
            nid = r.choice(voters)
            what = f"remove voter {nid}"
            result = core.remove_voter_op(self.now, nid, self.dirs[nid])
        if isinstance(result, tuple):
            self.stats["voter_changes_refused"] += 1
            self.log(f"n{leader.node_id} {what} refused: {result[0]} {result[1]}")
        else:
            self.stats["voter_changes"] += 1
            self.log(f"n{leader.node_id} {what} (op {result})")
            self.pending_ops[leader.node_id] = (result, what)
        self.apply_outputs(leader, core.tick(self.now))

    def note_voters_committed(self, e: m.LogEntry) -> None:
        """A committed Voters record may change the set by one voter at most."""
        new = VoterSet.decode(e.payload)
        old = self.committed_voters
        if old is not None and len(old.ids ^ new.ids) > 1:
            self.fail(f"voter set changed by more than one at {e.offset}: {old.ids} -> {new.ids}")
        if not new.ids:
            self.fail(f"empty voter set committed at {e.offset}")
        self.committed_voters = new

    # --- clients and the state machine -------------------------------------------------------

    def client(self) -> None:
        leaders = [
            n
            for n in self.nodes.values()
            if n.up and n.core.is_leader and n.paused_until <= self.now
        ]
        if leaders and self.faults:
            node = max(leaders, key=lambda n: n.core.epoch)
            payloads = []
            for _ in range(1 + self.rng.randrange(3)):
                self.payload_counter += 1
                payloads.append(b"payload-%08d" % self.payload_counter)
            _, outputs = node.core.append(self.now, payloads)
            self.stats["appends"] += len(payloads)
            self.apply_outputs(node, outputs)
            if node.up and self.rng.random() < self.p.targeted / 4:
                self.crash_node(node, 10 + self.rng.randrange(1000))
        if self.faults:
            self.push(self.now + 1 + self.rng.randrange(2 * self.p.client_every), self.CLIENT, None)

    def on_committed(self, node: Node, hw: int) -> None:
        if self.changed_logs:  # what is about to be applied first meets Log Matching
            self.check_log_matching()
        if hw < node.last_hw:
            self.fail(f"n{node.node_id} high watermark went down {node.last_hw} -> {hw}")
        node.last_hw = hw
        start = len(node.applied)
        if start < node.log.start_offset:
            self.fail(
                f"n{node.node_id} applied {start} below its log start {node.log.start_offset}"
            )
        if hw > start:
            entries = node.log.read(start, hw - start)
            if len(entries) != hw - start:
                self.fail(
                    f"n{node.node_id} committed {hw} but its log ends at {node.log.end_offset}"
                )
            self.check_entries(node, start, entries)
            node.applied.extend(entries)

    def check_entries(self, node: Node, start: int, entries: list[m.LogEntry]) -> None:
        committed = self.committed
        for i, e in enumerate(entries, start):
            key = (e.epoch, e.payload, e.control)
            if i < len(committed):
                c = committed[i]
                if (c.epoch, c.payload, c.control) != key:
                    self.fail(f"n{node.node_id} committed {e} at {i} but {c} was committed there")
            elif i == len(committed):
                if e.is_voters:
                    self.note_voters_committed(e)
                if not e.control:
                    if e.payload in self.committed_payloads:
                        self.fail(f"payload {e.payload!r} committed twice (again at {i})")
                    self.committed_payloads.add(e.payload)
                committed.append(m.LogEntry(i, e.epoch, e.payload, e.control, e.control_type))
            else:
                self.fail(f"n{node.node_id} committed {i} with a gap after {len(committed)}")

    def take_snapshot(self, node: Node) -> None:
        end = len(node.applied)
        if end <= node.log.start_offset:
            return
        self.stats["snapshots"] += 1
        self.apply_outputs(node, node.core.snapshot(self.now, end, encode_state(node.applied)))

    def load_snapshot(self, node: Node, sid: m.SnapshotId) -> None:
        data = node.log.read_snapshot(sid)
        if data is None:
            self.fail(f"n{node.node_id} lost snapshot {sid}")
            return
        entries = decode_state(data)
        if len(entries) != sid.end_offset:
            self.fail(f"n{node.node_id} snapshot {sid} holds {len(entries)} entries")
        if entries and entries[-1].epoch != sid.epoch:
            self.fail(f"n{node.node_id} snapshot {sid} ends in epoch {entries[-1].epoch}")
        self.check_entries(node, 0, entries)
        self.stats["installs"] += 1
        node.applied = entries

    # --- checks -----------------------------------------------------------------------------

    def check_step(self) -> None:
        if self.changed_logs:
            self.check_log_matching()
        for node in self.nodes.values():
            core = node.core
            if not node.up:
                continue
            if (
                not node.voter
                and not self.p.dynamic
                and core.state_name
                not in (
                    "Unattached",
                    "Follower",
                )
            ):
                self.fail(f"observer n{node.node_id} is {core.state_name}")
            if not core.can_campaign and core.state_name in ("Prospective", "Candidate"):
                self.fail(f"n{node.node_id}, no voter, is {core.state_name}")
            if core.is_leader and self.p.dynamic:
                pending = [
                    e
                    for e in node.log.read_control(max(len(self.committed), node.log.start_offset))
                    if e.is_voters
                ]
                if len(pending) > 1:
                    self.fail(f"n{node.node_id} has {len(pending)} uncommitted voter changes")
            if core.is_leader:
                self.note_leader(node, core.epoch)
                if node.paused_until <= self.now:
                    self.check_quorum(node)
                    self.check_confirmed(node)
            else:
                node.leader_since = -1
            if core.high_watermark < node.last_hw:
                self.fail(f"n{node.node_id} high watermark went down to {core.high_watermark}")
        n = len(self.committed)
        if n:
            self.check_durable(n - 1)
            self.check_durable(self.rng.randrange(n))

    def check_log_matching(self) -> None:
        """Every entry written since the last step against every entry ever held anywhere: the
        same (offset, epoch) must mean the same content after an entry of the same epoch."""
        ids = self.entry_ids
        for log in self.changed_logs:
            start, end = log.start_offset, log.end_offset
            lo = max(log.unchecked, start)
            log.unchecked = CLEAN
            if lo >= end:
                continue
            prev: int | None
            if lo > start:
                prev = log.read(lo - 1, 1)[0].epoch
            elif lo == 0:
                prev = 0
            else:  # the first entry after a snapshot follows the snapshot's last entry
                snap = log.latest_snapshot_id
                prev = snap.epoch if snap is not None and snap.end_offset == lo else None
            for e in log.read(lo, end - lo):
                key = (e.offset, e.epoch)
                seen = ids.get(key)
                if seen is None:
                    ids[key] = (e.payload, e.control, e.control_type, prev, log.node_id)
                elif seen[:3] != (e.payload, e.control, e.control_type) or (
                    prev is not None and seen[3] is not None and prev != seen[3]
                ):
                    self.fail(
                        f"Log Matching: n{log.node_id} holds {e} after an entry of epoch {prev}, "
                        f"but n{seen[4]} held {seen[:3]} at offset {e.offset} in epoch {e.epoch} "
                        f"after an entry of epoch {seen[3]}"
                    )
                elif seen[3] is None and prev is not None:
                    ids[key] = (*seen[:3], prev, seen[4])
                prev = e.epoch
        self.changed_logs.clear()

    def check_leader_completeness(self, node: Node, epoch: int) -> None:
        """A newly elected leader's log holds every entry committed so far (in earlier epochs):
        below its log start in its snapshot (checked when made or loaded), the rest as entries."""
        committed = self.committed
        n = len(committed)
        log = node.log
        if log.end_offset < n:
            self.fail(
                f"Leader Completeness: n{node.node_id} elected in epoch {epoch} with its log "
                f"ending at {log.end_offset}, but {n} entries are committed"
            )
        lo = log.start_offset
        if lo >= n:
            return
        for e in log.read(lo, n - lo):
            c = committed[e.offset]
            if (e.epoch, e.payload, e.control) != (c.epoch, c.payload, c.control):
                self.fail(
                    f"Leader Completeness: n{node.node_id} elected in epoch {epoch} holds {e} "
                    f"where {c} is committed"
                )

    def check_confirmed(self, node: Node) -> None:
        """A leader that confirms its leadership after a pause was not deposed before it ran
        again (its stale timers and the fetches that waited for it must not confirm it)."""
        epoch = node.core.epoch
        if node.pause_leader_epoch != epoch or not node.core.leader_confirmed(self.now):
            return
        node.pause_leader_epoch = -1  # checked once, at the first confirmation
        self.stats["confirmed_after_pause"] += 1
        for later, at in self.elected_at.items():
            if later > epoch and at <= node.resumed_at:
                self.fail(
                    f"n{node.node_id} confirms its leadership of epoch {epoch} after a pause "
                    f"that ended at {node.resumed_at}, but n{self.leaders[later]} was elected "
                    f"in epoch {later} at {at}"
                )

    def note_leader(self, node: Node, epoch: int) -> None:
        self.elected_at.setdefault(epoch, self.now)
        prev = self.leaders.setdefault(epoch, node.node_id)
        if prev != node.node_id:
            self.fail(f"two leaders in epoch {epoch}: n{prev} and n{node.node_id}")

    def note_reach(self) -> None:
        """Links only change at events: before one, whatever was connected still is."""
        for node in self.nodes.values():
            if node.up and node.leader_since >= 0:
                group = self.router.group
                g = group[node.node_id]
                for v in self.nodes:
                    if self.nodes[v].up and group[v] == g:
                        node.reach[v] = self.now

    def check_quorum(self, node: Node) -> None:
        """A leader must resign once it cannot have heard from a majority (itself included) for
        1.5 x fetch timeout: no voter outside its partition (or down) can have fetched."""
        if node.leader_since < 0:
            node.leader_since = self.now
            node.reach = {}
        self.note_reach()
        voters = node.core.voters
        me = node.node_id
        needed = len(voters) // 2 + (0 if me in voters else 1)
        if needed == 0:
            return
        times = sorted(
            (max(node.reach.get(v, -1), node.leader_since) for v in voters if v != me),
            reverse=True,
        )
        # a fetch sent just before its sender crashed still arrives: one latency of slack
        deadline = (
            times[needed - 1] + int(self.config.fetch_timeout_ms * 1.5) + self.p.max_latency + 1
        )
        if self.now > deadline:
            self.fail(
                f"n{me} still leads {self.now - times[needed - 1]} ms after losing its majority"
            )

    def check_durable(self, offset: int) -> None:
        sets = [self.voter_ids]
        if self.p.dynamic:
            sets = [self.voters_now()]
            if self.committed_voters is not None:
                sets.append(self.committed_voters.ids)
        for voters in sets:
            self.check_durable_on(offset, voters)

    def check_durable_on(self, offset: int, voters: frozenset[int]) -> None:
        """Every majority of ``voters`` must hold the entry: n - majority + 1 of them do."""
        want = self.committed[offset]
        holders = 0
        for nid in voters:
            node = self.nodes[nid]
            log = node.log
            if offset < log.start_offset:
                holders += 1  # inside the snapshot, whose content was checked when it was made
            elif offset < log.flushed_offset:
                e = log.read(offset, 1)[0]
                if (e.epoch, e.payload, e.control) == (want.epoch, want.payload, want.control):
                    holders += 1
        needed = len(voters) - (len(voters) // 2 + 1) + 1
        if holders < needed:
            self.fail(
                f"committed entry {offset} ({want}) durable on only {holders} of voters "
                f"{sorted(voters)}"
            )

    def current_leader(self) -> Node | None:
        leaders = [n for n in self.nodes.values() if n.up and n.core.is_leader]
        return max(leaders, key=lambda n: n.core.epoch) if leaders else None

    def settled(self) -> bool:
        if self.faults:
            return False
        leader = self.current_leader()
        if leader is None:
            return False
        st = leader.core.state
        assert isinstance(st, LeaderState)
        if self.elected_after_heal < 0 and st.high_watermark > st.epoch_start_offset:
            self.elected_after_heal = self.now - self.heal_at
        hw = leader.core.high_watermark
        if hw != leader.log.end_offset:
            return False
        return all(
            n.core.high_watermark == hw and n.core.epoch == st.epoch and n.log.end_offset == hw
            for n in self.nodes.values()
        )

    def final_check(self) -> None:
        if self.elected_after_heal < 0:
            self.fail(f"no leader committed in its epoch within {SETTLE_MS} ms of the heal")
        if self.elected_after_heal > ELECTION_BOUND_MS:
            self.fail(
                f"leader elected {self.elected_after_heal} ms after the heal (bound {ELECTION_BOUND_MS})"
            )
        if not self.settled():
            states = {
                n.node_id: (n.core.state_name, n.core.epoch, n.core.high_watermark)
                for n in self.nodes.values()
            }
            self.fail(f"did not converge after the heal: {states}")
        leader = self.current_leader()
        assert leader is not None
        hw = leader.core.high_watermark
        if len(self.committed) > hw:
            self.fail(f"{len(self.committed)} entries were committed but the final leader has {hw}")
        for node in self.nodes.values():
            log = node.log
            entries = log.read(log.start_offset, hw)
            self.check_entries(node, log.start_offset, entries)
            if len(node.applied) != hw:
                self.fail(f"n{node.node_id} applied {len(node.applied)} of {hw}")
        self.stats["committed"] = len(self.committed)
        self.stats["election_ms"] = self.elected_after_heal


def run_seed(
    seed: int, fault_ms: int = 8000, trace: bool = False, dynamic: bool = False
) -> dict[str, int]:
    params = Params.from_seed(seed, fault_ms, dynamic=dynamic)
    return Simulation(seed, fault_ms=fault_ms, params=params, trace=trace).run()


def main(argv: list[str] | None = None) -> int:
    def add_args(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--dynamic", action="store_true", help="KIP-853: voters change at random")

    return cli(
        __doc__ or "",
        lambda seed, args: run_seed(seed, args.fault_ms, args.trace, args.dynamic),
        argv,
        default_fault_ms=8000,
        add_args=add_args,
        worst=("election_ms",),
    )


if __name__ == "__main__":
    sys.exit(main())
