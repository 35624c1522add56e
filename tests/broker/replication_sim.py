"""A seeded, deterministic simulation of partition replication (broker/replication/).

One partition, replicas [1, 2, 3], driven by the sans-IO cores (``LeaderPartitionState``,
``FollowerPartitionState``) over in-memory logs. One ``random.Random(seed)`` drives everything:
the settings (``Params``), a fake clock and event queue, and the faults.

- Brokers: a leader serves follower Fetches, producers' appends (acks=all / acks=1) and a
  periodic ISR check; followers fetch in a loop (one request in flight, a timeout, back-offs),
  truncate on DivergingEpoch and reset on OFFSET_OUT_OF_RANGE; logs flush at random times.
- A controller (never fails; Kafka's KRaft rules): brokers register with a new broker epoch
  (fenced until they catch up with metadata); it validates AlterPartition (leader epoch, leader,
  partition epoch, eligible members); fencing a broker removes it from the ISR (never emptying
  it) and elects a new leader from the ISR in replica order, bumping the leader epoch; a broker
  that registers again after an unclean shutdown leaves the ISR at once (KIP-966's rule);
  unfencing elects a leader for a leaderless partition whose ISR holds the broker. Every change
  reaches every running broker as metadata, in order, after a random delay.
- The network delays and drops messages (fetches, AlterPartition) at random; a crashed or
  restarted broker loses what was sent to it.
- Faults: crashes (the leader half the time) that often lose the unflushed tail of the log;
  the controller notices a crash after up to a session timeout, or when the broker registers
  again; spurious fences of running brokers (missed heartbeats) that heal; DeleteRecords on
  the leader.
- The promise checked is Kafka's: nothing committed is lost while the ISR keeps one member
  that did not lose records. So a crash loses records only while another ISR member runs, and
  the last running ISR member is neither crashed nor fenced while a broker that lost records
  is (or may still become, through an AlterPartition in flight) an ISR member. Beyond that
  Kafka without KIP-966 does lose acknowledged records, as Jepsen showed; the run fails if the
  ISR is ever left with only such brokers (a bug in these rules).

Checked after every event:

- a leader's high watermark never decreases within its leader epoch, never moves while its ISR
  is under min(min.insync.replicas, replication factor), and is never above its own log end
  nor above the actual log end of any running member of the controller's ISR;
- committed records never change: every record below a leader's high watermark joins a global
  committed prefix, and must match it wherever a later leader's high watermark covers it;
- every running member of the controller's ISR holds the whole committed prefix (so an
  acknowledged acks=all record is on every ISR member that did not crash since it joined);
- an acks=all acknowledgement names a committed record; NOT_ENOUGH_REPLICAS refusals are only
  given while the ISR is under min.insync.replicas.

After the faults: every broker restarts and is unfenced, the network heals, and the run must
settle within ``SETTLE_MS``: one leader, the ISR is all replicas, every log ends at the leader's
high watermark. Then every replica holds the same (offset, epoch, record) sequence, and every
acknowledged record is in it. Any exception from a core fails the run with its seed.

The clock, the router's fault model, the trace, the seed loop and failure reports come from
``tests/broker/sim_harness.py``.

Entry points:
    REPL_SEED=1234 python -m pytest tests/broker/test_replication_sim.py -k replay -s (one seed, traced)
    python -m tests.broker.replication_sim --seeds 100000 --max-seconds 3600            (long run)
    python -m tests.broker.replication_sim --seed 1234 --trace                          (one seed, traced)
"""

import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from broker.log.epoch_cache import LeaderEpochCache
from broker.replication.follower_state import (
    FetchPartition,
    FetchResponsePartition,
    FollowerPartitionState,
    FollowerStatus,
)
from broker.replication.isr import AlterPartitionRequest
from broker.replication.partition_state import LeaderPartitionState, ReplicationConfig
from tests.broker.sim_harness import Router, SeededSimulation, SimulationFailure, cli

__all__ = ["Params", "Simulation", "SimulationFailure", "run_seed"]

REPLICAS = (1, 2, 3)
CONTROLLER = 0
SETTLE_MS = 20_000
REQUEST_TIMEOUT_MS = 1500  # a produce waiting for acks=all gives up after this
NO_DIR = Path("/nonexistent-replication-sim")

Record = tuple[int, int]  # (leader epoch, record id)
Batch = tuple[int, list[Record]]  # (base offset, records)


@dataclass
class Params:
    max_latency: int
    drop: float
    crash_every: int  # mean ms between crashes; 0: none
    lossy: float  # chance that a crash loses the unflushed tail (when the rules allow it)
    session_ms: int  # the controller fences a crashed broker within this
    spurious_fence_every: int  # mean ms between fences of a running broker; 0: none
    metadata_delay: int
    produce_every: int
    acks_all: float
    min_isr: int
    lag_ms: int  # replica.lag.time.max.ms
    fetch_max: int  # records per fetch response
    flush_every: int
    delete_every: int  # mean ms between DeleteRecords on the leader; 0: none
    fault_ms: int

    @staticmethod
    def from_seed(seed: int, fault_ms: int) -> "Params":
        r = random.Random(seed ^ 0x5EED5)
        latency = r.choice([2, 10, 30, 80])
        return Params(
            max_latency=latency,
            drop=r.choice([0.0, 0.02, 0.1]),
            crash_every=r.choice([0, 500, 1000, 2000]),
            lossy=r.choice([0.5, 1.0]),
            session_ms=r.choice([50, 300, 900]),
            spurious_fence_every=r.choice([0, 0, 1500]),
            metadata_delay=r.choice([5, 50, 200]),
            produce_every=r.choice([15, 40, 100]),
            acks_all=r.choice([0.5, 0.9, 1.0]),
            min_isr=r.choice([1, 2, 2, 2, 3]),
            lag_ms=r.choice([100, 300, 600]),
            # one record per fetch only where round trips are short, or catching up takes minutes
            fetch_max=r.choice([1, 3, 50] if latency <= 10 else [5, 50]),
            flush_every=r.choice([30, 200, 1000]),
            delete_every=r.choice([0, 0, 0, 1500]),
            fault_ms=fault_ms,
        )


@dataclass(frozen=True, slots=True)
class Registration:
    """The controller's PartitionRecord view (satisfies ``PartitionRegistration``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class Image:
    version: int
    partition: Registration
    brokers: dict[int, tuple[int, bool]]  # broker id -> (broker epoch, fenced)


class View:
    """A broker's metadata image, as the leader core's ``BrokerView``."""

    __slots__ = ("image",)

    def __init__(self) -> None:
        self.image: Image | None = None

    def broker_epoch(self, broker_id: int) -> int | None:
        if self.image is None:
            return None
        reg = self.image.brokers.get(broker_id)
        return None if reg is None or reg[1] else reg[0]

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        return False


class MemLog:
    """A partition log in memory: records from ``start``, a flushed prefix, the real epoch cache.

    Durability (what ``crash`` keeps): records below ``flushed``, the log start offset, and the
    high watermark as of the last flush (Kafka's checkpoint files); truncations are durable at
    once. After a crash the epoch cache loses entries at or above the recovered end, as Kafka's
    log loader does.
    """

    __slots__ = ("cache", "durable_hw", "flushed", "hw", "recs", "start")

    def __init__(self) -> None:
        self.start = 0
        self.recs: list[Record] = []
        self.cache = LeaderEpochCache(NO_DIR, persist=False)
        self.flushed = 0
        self.hw = 0
        self.durable_hw = 0

    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def log_end_offset(self) -> int:
        return self.start + len(self.recs)

    @property
    def written_end_offset(self) -> int:
        return self.log_end_offset  # appends are written at once here

    @property
    def high_watermark(self) -> int:
        return self.hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.hw = min(max(offset, self.start), self.log_end_offset)

    @property
    def latest_epoch(self) -> int | None:
        return self.cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.log_end_offset)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        self.cache.assign(epoch, start_offset)

    def append_as_leader(self, epoch: int, ids: list[int]) -> int:
        if self.cache.latest_epoch != epoch:
            self.cache.assign(epoch, self.log_end_offset)
        self.recs.extend((epoch, i) for i in ids)
        return self.log_end_offset - 1

    def append_as_follower(self, records: Batch, max_epoch: int) -> bool:
        base, recs = records
        complete = True
        if max_epoch >= 0:
            keep = next((i for i, (e, _) in enumerate(recs) if e > max_epoch), len(recs))
            complete, recs = keep == len(recs), recs[:keep]
        if base != self.log_end_offset:
            raise AssertionError(f"follower append at {base}, log ends at {self.log_end_offset}")
        latest = self.cache.latest_epoch
        for i, (epoch, _) in enumerate(recs):
            if epoch != latest:
                self.cache.assign(epoch, base + i)
                latest = epoch
        self.recs.extend(recs)
        return complete

    def read(self, offset: int, max_records: int) -> Batch:
        i = offset - self.start
        return offset, self.recs[i : i + max_records]

    def truncate_to(self, offset: int) -> None:
        end = self.log_end_offset
        if offset >= end:
            self.cache.truncate_from_end(end)  # a leader's empty epoch entry goes too (Kafka)
            return
        if offset < self.start:
            self.truncate_fully_and_start_at(offset)
            return
        del self.recs[offset - self.start :]
        self.cache.truncate_from_end(offset)
        self.hw = min(self.hw, offset)
        self.flushed = min(self.flushed, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.recs.clear()
        self.start = offset
        self.cache.clear()
        self.hw = self.flushed = self.durable_hw = offset

    def increment_log_start_offset(self, offset: int) -> None:
        if offset > self.hw:
            raise AssertionError(f"log start {offset} above the high watermark {self.hw}")
        if offset > self.start:
            del self.recs[: offset - self.start]
            self.start = offset
            self.cache.truncate_from_start(offset)

    def flush(self) -> None:
        self.flushed = self.log_end_offset
        self.durable_hw = self.hw

    def crash(self, lossy: bool) -> int:
        """Lose the unflushed tail (``lossy``) and recover; returns how many records went."""
        before = self.log_end_offset
        if lossy:
            keep = self.flushed - self.start
            del self.recs[max(keep, 0) :]
        else:
            self.durable_hw = self.hw
        end = self.log_end_offset
        self.cache.truncate_from_end(end)
        self.hw = min(max(self.durable_hw, self.start), end)
        self.flushed = end
        return before - end


class Produce(NamedTuple):
    node: int
    incarnation: int
    base: int
    end: int
    records: tuple[Record, ...]


@dataclass
class Node:
    node_id: int
    log: MemLog = field(default_factory=MemLog)
    view: View = field(default_factory=View)
    up: bool = True
    incarnation: int = 0
    broker_epoch: int = -1
    leader: LeaderPartitionState | None = None
    follower: FollowerPartitionState[Batch] | None = None
    fetching: tuple[int, FetchPartition] | None = None  # (correlation id, request) in flight
    offsets_corr: int = -1
    alter: AlterPartitionRequest | None = None  # AlterPartition in flight
    produces: list[Produce] = field(default_factory=list)
    hw_epoch: int = -1  # the leader epoch of ``hw_seen``
    hw_seen: int = -1
    verified: int = 0  # the log matches the committed prefix below this offset
    md_version: int = 0
    md_at: int = 0  # metadata reaches the node in order: not before this


class Controller:
    def __init__(self) -> None:
        self.reg = Registration(REPLICAS, REPLICAS, REPLICAS[0], 0, 0)
        self.brokers: dict[int, tuple[int, bool]] = {}
        self.next_broker_epoch = 100
        self.version = 0

    def image(self) -> Image:
        return Image(self.version, self.reg, dict(self.brokers))

    def active(self, b: int) -> bool:
        reg = self.brokers.get(b)
        return reg is not None and not reg[1]

    def change(self, isr: tuple[int, ...] | None = None) -> bool:
        """A PartitionChangeRecord: a new ISR (an empty one keeps the old), and an election if
        the leader is no longer a valid one (in the ISR and active). True if anything changed."""
        reg = self.reg
        new_isr = reg.isr if isr is None or not isr else isr
        leader = reg.leader
        if leader not in new_isr or not self.active(leader):
            leader = next((r for r in reg.replicas if r in new_isr and self.active(r)), -1)
        leader_changed = leader != reg.leader
        if new_isr == reg.isr and not leader_changed:
            return False
        self.reg = Registration(
            reg.replicas,
            new_isr,
            leader,
            reg.leader_epoch + (1 if leader_changed else 0),
            reg.partition_epoch + 1,
        )
        return True

    def fence(self, b: int) -> bool:
        epoch, _ = self.brokers[b]
        self.brokers[b] = (epoch, True)
        self.change(tuple(r for r in self.reg.isr if r != b))
        return True

    def register(self, b: int) -> int:
        """A (re)registration: a new broker epoch, fenced; it leaves the ISR (unclean shutdown)."""
        self.next_broker_epoch += 1
        self.brokers[b] = (self.next_broker_epoch, True)
        self.change(tuple(r for r in self.reg.isr if r != b))
        return self.next_broker_epoch

    def unfence(self, b: int) -> None:
        epoch, _ = self.brokers[b]
        self.brokers[b] = (epoch, False)
        if self.reg.leader < 0:
            self.change()

    def alter_partition(self, req: AlterPartitionRequest) -> tuple[ErrorCode, Registration | None]:
        reg = self.reg
        if req.leader_epoch > reg.leader_epoch or req.partition_epoch > reg.partition_epoch:
            return ErrorCode.not_controller, None
        if req.leader_epoch < reg.leader_epoch:
            return ErrorCode.fenced_leader_epoch, None
        if req.leader_id != reg.leader:
            return ErrorCode.invalid_request, None
        if req.partition_epoch < reg.partition_epoch:
            return ErrorCode.invalid_update_version, None
        isr = req.isr
        if not isr <= set(reg.replicas) or reg.leader not in isr:
            return ErrorCode.invalid_request, None
        for b, e in req.new_isr:
            known = self.brokers.get(b)
            if known is None or known[1] or (e != -1 and e != known[0]):
                return ErrorCode.ineligible_replica, None
        new_isr = tuple(r for r in reg.replicas if r in isr)
        if new_isr != reg.isr:
            self.reg = Registration(
                reg.replicas, new_isr, reg.leader, reg.leader_epoch, reg.partition_epoch + 1
            )
        return ErrorCode.none, self.reg


# event kinds
(
    DELIVER,
    FETCH_TICK,
    FETCH_TIMEOUT,
    LEADER_TICK,
    ALTER_TIMEOUT,
    PRODUCE,
    PRODUCE_TIMEOUT,
    CRASH,
    RESTART,
    FENCE,
    SPURIOUS_FENCE,
    UNFENCE,
    METADATA,
    FLUSH,
    DELETE_RECORDS,
    END_FAULTS,
) = range(16)

# message kinds
FETCH, FETCH_RESP, OFFSETS, OFFSETS_RESP, ALTER, ALTER_RESP = range(6)


class Simulation(SeededSimulation):
    what = "replication simulation"

    def __init__(
        self,
        seed: int,
        fault_ms: int = 3000,
        params: Params | None = None,
        trace: bool = False,
    ) -> None:
        super().__init__(seed, trace, trace_width=6)
        self.p = params or Params.from_seed(seed, fault_ms)
        self.router = Router(self.rng, REPLICAS, self.p.max_latency, self.p.drop)
        self.config = ReplicationConfig(
            replica_lag_time_max_ms=self.p.lag_ms, min_insync_replicas=self.p.min_isr
        )
        self.min_isr = min(self.p.min_isr, len(REPLICAS))  # the effective minimum
        self.controller = Controller()
        self.nodes = {b: Node(b) for b in REPLICAS}
        self.corr = 0
        self.next_record = 0
        self.committed: list[Record | None] = []
        self.acked: dict[int, Record] = {}
        # brokers that lost records in a crash and may still be (or become) ISR members: in the
        # ISR, or down (an AlterPartition in flight can add a crashed broker until it registers)
        self.tainted: set[int] = set()
        self.heal_at = -1
        self.settled_at = -1
        self.stats = {
            "events": 0,
            "produced": 0,
            "acked": 0,
            "refused": 0,
            "crashes": 0,
            "lossy": 0,
            "lost_records": 0,
            "fences": 0,
            "truncations": 0,
            "elections": 0,
            "alters": 0,
            "deletes": 0,
            "resets": 0,
        }

    # --- plumbing -----------------------------------------------------------------------------

    @property
    def faults(self) -> bool:
        return self.router.faults

    def replay_command(self) -> str:
        return (
            f"REPL_SEED={self.seed} python -m pytest tests/broker/test_replication_sim.py "
            "-k replay -s"
        )

    def later(self, mean: int) -> int:
        return self.now + 1 + self.rng.randrange(2 * mean)

    def send(self, src: int, dst: int, kind: int, payload: Any) -> None:
        """Delay (and maybe drop) a message. A restart of either end loses it."""
        arrivals = self.router.arrivals(self.now)
        if not arrivals:
            return
        src_inc = self.nodes[src].incarnation if src else 0
        dst_inc = self.nodes[dst].incarnation if dst else 0
        for at in arrivals:
            self.push(at, DELIVER, (src, src_inc, dst, dst_inc, kind, payload))

    def alive(self, b: int, incarnation: int) -> bool:
        if b == CONTROLLER:
            return True
        node = self.nodes[b]
        return node.up and node.incarnation == incarnation

    # --- running ------------------------------------------------------------------------------

    def run(self) -> dict[str, int]:
        p = self.p
        for node in self.nodes.values():
            node.broker_epoch = self.controller.register(node.node_id)
            self.controller.unfence(node.node_id)
        self.controller.reg = Registration(REPLICAS, REPLICAS, REPLICAS[0], 0, 0)
        self.publish()
        for node in self.nodes.values():
            self.push(self.later(p.flush_every), FLUSH, (node.node_id, node.incarnation))
        self.push(self.later(p.produce_every), PRODUCE)
        if p.crash_every:
            self.push(self.later(p.crash_every), CRASH)
        if p.spurious_fence_every:
            self.push(self.later(p.spurious_fence_every), SPURIOUS_FENCE)
        if p.delete_every:
            self.push(self.later(p.delete_every), DELETE_RECORDS)
        self.push(p.fault_ms, END_FAULTS)
        self._handlers = self.handlers()
        self.run_events(p.fault_ms + SETTLE_MS)
        self.final_check()
        return self.stats

    def dispatch(self, kind: int, payload: Any) -> None:
        self._handlers[kind](payload)

    def settled(self) -> bool:
        if self.faults or not self.at_rest():
            return False
        self.settled_at = self.now
        return True

    def handlers(self) -> dict[int, Any]:
        return {
            DELIVER: self.deliver,
            FETCH_TICK: self.on_fetch_tick,
            FETCH_TIMEOUT: self.on_fetch_timeout,
            LEADER_TICK: self.on_leader_tick,
            ALTER_TIMEOUT: self.on_alter_timeout,
            PRODUCE: self.on_produce,
            PRODUCE_TIMEOUT: self.on_produce_timeout,
            CRASH: self.on_crash,
            RESTART: self.on_restart,
            FENCE: self.on_fence,
            SPURIOUS_FENCE: self.on_spurious_fence,
            UNFENCE: self.on_unfence,
            METADATA: self.on_metadata,
            FLUSH: self.on_flush,
            DELETE_RECORDS: self.on_delete_records,
            END_FAULTS: self.on_end_faults,
        }

    # --- metadata -----------------------------------------------------------------------------

    def publish(self) -> None:
        """The controller committed a change: every running broker learns it, in order."""
        c = self.controller
        c.version += 1
        image = c.image()
        reg = image.partition
        # a restarted broker re-registered: an AlterPartition sent before cannot add it any more
        self.tainted = {b for b in self.tainted if b in reg.isr or not self.nodes[b].up}
        if self.tainted >= set(reg.isr):
            self.fail(f"the ISR {list(reg.isr)} holds only logs that lost records (a sim bug)")
        self.log(
            f"controller v{c.version}: leader={reg.leader} epoch={reg.leader_epoch} "
            f"isr={list(reg.isr)} pe={reg.partition_epoch} brokers={image.brokers}"
        )
        for node in self.nodes.values():
            if node.up:
                self.send_metadata(node, image)

    def send_metadata(self, node: Node, image: Image) -> None:
        at = max(self.now + 1 + self.rng.randrange(self.p.metadata_delay), node.md_at)
        node.md_at = at
        self.push(at, METADATA, (node.node_id, node.incarnation, image))

    def on_metadata(self, payload: tuple[int, int, Image]) -> None:
        b, inc, image = payload
        node = self.nodes[b]
        if not self.alive(b, inc) or image.version <= node.md_version:
            return
        node.md_version = image.version
        node.view.image = image
        reg = image.partition
        if reg.leader == b:
            if node.leader is None:
                node.follower = None
                node.fetching = None
                node.leader = LeaderPartitionState(
                    b, node.broker_epoch, node.log, node.view, self.config
                )
                self.stats["elections"] += 1
                self.log(f"n{b} leads epoch {reg.leader_epoch} from {node.log.log_end_offset}")
                tick = (b, node.incarnation, node.leader)
                self.push(self.now + self.p.lag_ms // 2, LEADER_TICK, tick)
            if node.leader.become_leader(self.now, reg):
                self.on_hw_moved(node)
            self.check_produces(node)
        else:
            if node.leader is not None:
                node.leader.resign()
                self.check_produces(node)
                node.leader = None
                node.alter = None
            if node.follower is None:
                node.follower = FollowerPartitionState(b, node.log)
            if node.follower.become_follower(reg.leader, reg.leader_epoch):
                node.fetching = None
                self.push(self.now, FETCH_TICK, (b, node.incarnation))

    # --- followers ----------------------------------------------------------------------------

    def on_fetch_tick(self, payload: tuple[int, int]) -> None:
        b, inc = payload
        node = self.nodes[b]
        if not self.alive(b, inc) or node.follower is None or node.fetching is not None:
            return
        f = node.follower
        if f.status is FollowerStatus.NEEDS_OFFSETS:
            self.corr += 1
            node.offsets_corr = self.corr
            self.send(b, f.leader_id, OFFSETS, (self.corr,))
            self.push(self.now + self.timeout(), FETCH_TICK, (b, inc))  # resend if lost
            return
        req = f.fetch_request()
        if req is None:
            return
        self.corr += 1
        node.fetching = (self.corr, req)
        self.send(b, f.leader_id, FETCH, (self.corr, req, node.broker_epoch))
        self.push(self.now + self.timeout(), FETCH_TIMEOUT, (b, inc, self.corr))

    def timeout(self) -> int:
        return 4 * self.p.max_latency + 20

    def on_fetch_timeout(self, payload: tuple[int, int, int]) -> None:
        b, inc, corr = payload
        node = self.nodes[b]
        if self.alive(b, inc) and node.fetching is not None and node.fetching[0] == corr:
            node.fetching = None
            self.on_fetch_tick((b, inc))

    def on_fetch_response(self, node: Node, payload: Any) -> None:
        corr, resp = payload
        f = node.follower
        if f is None or node.fetching is None or node.fetching[0] != corr:
            return
        req = node.fetching[1]
        node.fetching = None
        step = f.on_fetch_response(req, resp)
        b, inc = node.node_id, node.incarnation
        if step.truncated_to >= 0:
            self.on_truncated(node, step.truncated_to, "diverging epoch")
        if step.ignored or f.status is FollowerStatus.FENCED:
            return
        if step.backoff:
            delay = 50
        elif (step.appended and resp.records[1]) or step.truncated_to >= 0:
            delay = 0
        else:
            delay = 5 + self.rng.randrange(30)  # an empty answer: the leader's long poll
        self.push(self.now + delay, FETCH_TICK, (b, inc))

    def on_offsets_response(self, node: Node, payload: Any) -> None:
        corr, error, start, end = payload
        f = node.follower
        if f is None or corr != node.offsets_corr:
            return
        node.offsets_corr = -1
        if error != ErrorCode.none:
            self.push(self.now + 50, FETCH_TICK, (node.node_id, node.incarnation))
            return
        before = node.log.log_end_offset
        step = f.on_leader_offsets(start, end)
        self.stats["resets"] += 1
        self.log(f"n{node.node_id} out of range at {before}: leader has [{start}, {end})")
        if step.truncated_to >= 0:
            self.on_truncated(node, step.truncated_to, "out of range")
        self.push(self.now, FETCH_TICK, (node.node_id, node.incarnation))

    def on_truncated(self, node: Node, offset: int, why: str) -> None:
        self.stats["truncations"] += 1
        self.log(
            f"n{node.node_id} truncated to {offset} ({why}), log ends at {node.log.log_end_offset}"
        )
        node.verified = min(node.verified, node.log.log_end_offset)
        if node.node_id in self.controller.reg.isr and offset < len(self.committed):
            self.fail(
                f"n{node.node_id} (in the ISR) truncated to {offset}, below the committed "
                f"{len(self.committed)}"
            )

    # --- the leader ---------------------------------------------------------------------------

    def on_fetch_request(self, node: Node, src: int, payload: Any) -> None:
        corr, req, broker_epoch = payload
        leader = node.leader
        if leader is None:
            resp: FetchResponsePartition[Batch] = FetchResponsePartition(
                ErrorCode.not_leader_or_follower
            )
        else:
            res = leader.on_follower_fetch(
                self.now,
                src,
                req.fetch_offset,
                last_fetched_epoch=req.last_fetched_epoch,
                current_leader_epoch=req.current_leader_epoch,
                broker_epoch=broker_epoch,
                log_start_offset=req.log_start_offset,
            )
            records = None
            if res.error == ErrorCode.none and res.diverging is None:
                records = node.log.read(res.read_offset, self.p.fetch_max)
            resp = FetchResponsePartition(
                res.error, res.high_watermark, res.log_start_offset, res.diverging, records
            )
            if res.alter_partition is not None:
                self.send_alter(node, res.alter_partition)
            if res.hw_moved:
                self.on_hw_moved(node)
        self.send(node.node_id, src, FETCH_RESP, (corr, resp))

    def on_offsets_request(self, node: Node, src: int, payload: Any) -> None:
        (corr,) = payload
        if node.leader is None:
            self.send(
                node.node_id, src, OFFSETS_RESP, (corr, ErrorCode.not_leader_or_follower, -1, -1)
            )
        else:
            log = node.log
            msg = (corr, ErrorCode.none, log.log_start_offset, log.log_end_offset)
            self.send(node.node_id, src, OFFSETS_RESP, msg)

    def send_alter(self, node: Node, req: AlterPartitionRequest) -> None:
        node.alter = req
        self.stats["alters"] += 1
        self.log(
            f"n{node.node_id} AlterPartition #{req.request_id} isr={sorted(req.isr)} pe={req.partition_epoch}"
        )
        self.send(node.node_id, CONTROLLER, ALTER, req)
        self.push(self.now + self.timeout(), ALTER_TIMEOUT, (node.node_id, node.incarnation, req))

    def on_alter_timeout(self, payload: tuple[int, int, AlterPartitionRequest]) -> None:
        b, inc, req = payload
        node = self.nodes[b]
        if self.alive(b, inc) and node.alter is req and node.leader is not None:
            self.send_alter(node, req)  # Kafka's AlterPartitionManager retries until answered

    def on_alter_response(self, node: Node, payload: Any) -> None:
        req, error, reg = payload
        if node.leader is None or node.alter is not req:
            return
        node.alter = None
        self.log(f"n{node.node_id} AlterPartition #{req.request_id}: {error.name}")
        out = node.leader.on_alter_partition_response(self.now, req.request_id, error, reg)
        if out.retry is not None:
            self.send_alter(node, out.retry)
        if out.hw_moved:
            self.on_hw_moved(node)

    def on_leader_tick(self, payload: tuple[int, int, LeaderPartitionState]) -> None:
        b, inc, leader = payload
        node = self.nodes[b]
        if not self.alive(b, inc) or node.leader is not leader:
            return
        req = leader.maybe_shrink_isr(self.now)
        if req is not None:
            self.send_alter(node, req)
        self.push(self.now + self.p.lag_ms // 2, LEADER_TICK, payload)

    def on_hw_moved(self, node: Node) -> None:
        self.observe_leader(node)
        self.check_produces(node)

    # --- the controller -----------------------------------------------------------------------

    def on_controller_message(self, src: int, kind: int, payload: Any) -> None:
        if kind != ALTER:
            return
        req: AlterPartitionRequest = payload
        before = self.controller.reg
        error, reg = self.controller.alter_partition(req)
        if self.controller.reg is not before:
            self.publish()
        self.send(CONTROLLER, src, ALTER_RESP, (req, error, reg))

    def deliver(self, payload: Any) -> None:
        src, src_inc, dst, dst_inc, kind, msg = payload
        if not self.alive(dst, dst_inc):
            return  # the connection broke
        if dst == CONTROLLER:
            if self.alive(src, src_inc):
                self.on_controller_message(src, kind, msg)
            return
        node = self.nodes[dst]
        if kind == FETCH:
            self.on_fetch_request(node, src, msg)
        elif kind == FETCH_RESP:
            self.on_fetch_response(node, msg)
        elif kind == OFFSETS:
            self.on_offsets_request(node, src, msg)
        elif kind == OFFSETS_RESP:
            self.on_offsets_response(node, msg)
        elif kind == ALTER_RESP:
            self.on_alter_response(node, msg)

    # --- producers ----------------------------------------------------------------------------

    def on_produce(self, _: Any) -> None:
        if not self.faults:
            return
        self.push(self.later(self.p.produce_every), PRODUCE)
        c = self.controller
        up = [n for n in self.nodes.values() if n.up]
        if not up:
            return
        target = self.nodes.get(c.reg.leader)
        if target is None or not target.up or self.rng.random() < 0.15:
            target = self.rng.choice(up)  # a client with stale metadata
        acks = -1 if self.rng.random() < self.p.acks_all else 1
        leader = target.leader
        if leader is None:
            return
        error = leader.append_check(acks)
        if error is not None:
            if error == ErrorCode.not_enough_replicas:
                self.stats["refused"] += 1
                if len(leader.isr) >= self.min_isr:
                    self.fail(f"n{target.node_id} refused acks=all with ISR {sorted(leader.isr)}")
            return
        ids = []
        for _ in range(1 + self.rng.randrange(3)):
            self.next_record += 1
            ids.append(self.next_record)
        base = target.log.log_end_offset
        end = target.log.append_as_leader(leader.leader_epoch, ids) + 1
        self.stats["produced"] += len(ids)
        records = tuple((leader.leader_epoch, i) for i in ids)
        if acks == -1:
            prod = Produce(target.node_id, target.incarnation, base, end, records)
            target.produces.append(prod)
            self.push(self.now + REQUEST_TIMEOUT_MS, PRODUCE_TIMEOUT, prod)
        if leader.on_append(self.now):
            self.on_hw_moved(target)

    def check_produces(self, node: Node) -> None:
        if not node.produces:
            return
        leader = node.leader
        waiting = []
        for prod in node.produces:
            done, error = (
                (False, ErrorCode.not_leader_or_follower)
                if leader is None
                else leader.acks_all_done(prod.end)
            )
            if error == ErrorCode.not_leader_or_follower:
                continue
            if not done:
                waiting.append(prod)
            elif error == ErrorCode.none:
                self.on_acked(prod)
        node.produces = waiting

    def on_acked(self, prod: Produce) -> None:
        self.stats["acked"] += len(prod.records)
        committed = self.committed
        for offset, rec in enumerate(prod.records, prod.base):
            if offset >= len(committed) or committed[offset] not in (rec, None):
                self.fail(f"acks=all acknowledged {rec} at {offset}, which is not committed")
            self.acked[offset] = rec

    def on_produce_timeout(self, prod: Produce) -> None:
        node = self.nodes[prod.node]
        if prod in node.produces:
            node.produces.remove(prod)

    # --- faults -------------------------------------------------------------------------------

    def running_isr(self, but: int = -1) -> list[int]:
        return [r for r in self.controller.reg.isr if r != but and self.nodes[r].up]

    def may_stop(self, b: int) -> bool:
        """May broker ``b`` stop being a running ISR member (crash, fence) now? Not if it is the
        last one while a broker that lost data is or may become a member: the ISR could be left
        with only logs that lost records (see ``crash``)."""
        return b not in self.controller.reg.isr or bool(self.running_isr(b)) or not self.tainted

    def on_crash(self, _: Any) -> None:
        if not self.faults:
            return
        self.push(self.later(self.p.crash_every), CRASH)
        up = [n for n in self.nodes.values() if n.up and self.may_stop(n.node_id)]
        if not up:
            return
        leader = self.nodes.get(self.controller.reg.leader)
        node = leader if leader in up and self.rng.random() < 0.5 else self.rng.choice(up)
        self.crash(node, 50 + self.rng.randrange(1500))

    def crash(self, node: Node, down_ms: int) -> None:
        b = node.node_id
        # A crash loses the unflushed tail only while another ISR member runs: the last running
        # one crashes clean (Kafka's promise holds while one ISR member keeps its log; when the
        # ISR is left with only logs that lost records, Kafka without KIP-966 loses them too).
        lossy = bool(self.running_isr(b)) and self.rng.random() < self.p.lossy
        if lossy:
            self.tainted.add(b)
        node.up = False
        node.incarnation += 1
        lost = node.log.crash(lossy)
        node.leader = node.follower = None
        node.fetching = None
        node.alter = None
        node.produces = []
        node.verified = min(node.verified, node.log.log_end_offset)
        node.md_version = 0
        node.view = View()
        self.stats["crashes"] += 1
        self.stats["lossy"] += lossy
        self.stats["lost_records"] += lost
        self.log(f"crash n{b} for {down_ms} ms ({'lost ' + str(lost) if lossy else 'clean'})")
        self.push(
            self.now + 1 + self.rng.randrange(self.p.session_ms), FENCE, (b, node.incarnation)
        )
        self.push(self.now + down_ms, RESTART, b)

    def on_fence(self, payload: tuple[int, int]) -> None:
        b, inc = payload
        node = self.nodes[b]
        if node.up or node.incarnation != inc or self.controller.brokers[b][1]:
            return  # restarted (and re-registered) already, or fenced already
        self.stats["fences"] += 1
        self.log(f"controller fences n{b} (session expired)")
        self.controller.fence(b)
        self.publish()

    def on_restart(self, b: int) -> None:
        node = self.nodes[b]
        if node.up:
            return
        node.up = True
        node.incarnation += 1
        node.md_at = self.now
        node.broker_epoch = self.controller.register(b)
        self.log(
            f"restart n{b}: broker epoch {node.broker_epoch}, log ends at {node.log.log_end_offset}"
        )
        self.publish()
        self.push(
            self.now + 1 + self.rng.randrange(self.p.metadata_delay) + 10,
            UNFENCE,
            (b, node.incarnation),
        )

    def on_unfence(self, payload: tuple[int, int]) -> None:
        b, inc = payload
        if not self.alive(b, inc) or not self.controller.brokers[b][1]:
            return
        self.controller.unfence(b)
        self.log(f"controller unfences n{b}")
        self.publish()

    def on_spurious_fence(self, _: Any) -> None:
        if not self.faults:
            return
        self.push(self.later(self.p.spurious_fence_every), SPURIOUS_FENCE)
        up = [
            n
            for n in self.nodes.values()
            if n.up and not self.controller.brokers[n.node_id][1] and self.may_stop(n.node_id)
        ]
        if not up:
            return
        node = self.rng.choice(up)
        self.stats["fences"] += 1
        self.log(f"controller fences running n{node.node_id} (missed heartbeats)")
        self.controller.fence(node.node_id)
        self.publish()
        self.push(
            self.now + 50 + self.rng.randrange(1000), UNFENCE, (node.node_id, node.incarnation)
        )

    def on_flush(self, payload: tuple[int, int]) -> None:
        b, inc = payload
        if not self.alive(b, inc):
            return
        self.nodes[b].log.flush()
        self.push(self.later(self.p.flush_every), FLUSH, payload)

    def on_delete_records(self, _: Any) -> None:
        if not self.faults:
            return
        self.push(self.later(self.p.delete_every), DELETE_RECORDS)
        leader = self.nodes.get(self.controller.reg.leader)
        if leader is None or not leader.up or leader.leader is None:
            return
        log = leader.log
        if log.hw > log.start:
            offset = log.start + self.rng.randrange(log.hw - log.start) + 1
            self.stats["deletes"] += 1
            self.log(f"n{leader.node_id} DeleteRecords before {offset}")
            log.increment_log_start_offset(offset)

    def on_end_faults(self, _: Any) -> None:
        self.router.heal_for_good()
        self.heal_at = self.now
        self.log("end of faults: the network heals, every broker restarts and is unfenced")
        for node in self.nodes.values():
            if not node.up:
                self.on_restart(node.node_id)
        for b, (_, fenced) in self.controller.brokers.items():
            node = self.nodes[b]
            if fenced:
                self.push(self.now + self.p.metadata_delay + 10, UNFENCE, (b, node.incarnation))

    # --- checks -------------------------------------------------------------------------------

    def observe_leader(self, node: Node) -> None:
        """A leader's HW: monotonic within its epoch; what it covers is (or becomes) committed."""
        leader = node.leader
        assert leader is not None
        hw = leader.high_watermark
        if leader.leader_epoch != node.hw_epoch:
            node.hw_epoch, node.hw_seen = leader.leader_epoch, hw
        elif hw < node.hw_seen:
            self.fail(
                f"n{node.node_id} HW went down {node.hw_seen} -> {hw} in epoch {node.hw_epoch}"
            )
        elif hw > node.hw_seen and len(leader.isr) < self.min_isr:
            self.fail(
                f"n{node.node_id} HW moved {node.hw_seen} -> {hw} with ISR {sorted(leader.isr)} "
                f"under min.insync.replicas {self.min_isr}"
            )
        node.hw_seen = hw
        log = node.log
        if hw > log.log_end_offset:
            self.fail(f"n{node.node_id} HW {hw} above its log end {log.log_end_offset}")
        committed = self.committed
        start = max(node.verified, log.start)
        for offset in range(start, min(hw, len(committed))):
            want = committed[offset]
            if want is not None and log.recs[offset - log.start] != want:
                self.fail(
                    f"n{node.node_id} (leader, HW {hw}) has {log.recs[offset - log.start]} at "
                    f"{offset} where {want} was committed"
                )
        if hw > len(committed):
            committed.extend([None] * max(0, log.start - len(committed)))
            committed.extend(log.recs[len(committed) - log.start : hw - log.start])
        node.verified = max(node.verified, min(hw, len(committed)))

    def check_step(self) -> None:
        committed_end = len(self.committed)
        reg = self.controller.reg
        isr_ends = []
        for b in reg.isr:
            node = self.nodes[b]
            if not node.up:
                continue
            log = node.log
            end = log.log_end_offset
            isr_ends.append(end)
            if end < committed_end:
                self.fail(
                    f"n{b} is in the ISR {list(reg.isr)} but ends at {end} < committed {committed_end}"
                )
            if node.verified < committed_end:
                committed = self.committed
                for offset in range(max(node.verified, log.start), committed_end):
                    want = committed[offset]
                    if want is not None and log.recs[offset - log.start] != want:
                        self.fail(
                            f"n{b} (in the ISR) has {log.recs[offset - log.start]} at {offset} "
                            f"where {want} was committed"
                        )
                node.verified = committed_end
        floor = min(isr_ends) if isr_ends else 1 << 62
        for node in self.nodes.values():
            leader = node.leader
            if node.up and leader is not None and leader.is_leader:
                if leader.high_watermark != node.hw_seen or leader.leader_epoch != node.hw_epoch:
                    self.observe_leader(node)
                if leader.high_watermark > floor:
                    self.fail(
                        f"n{node.node_id} HW {leader.high_watermark} above an ISR member's log end {floor}"
                    )

    def at_rest(self) -> bool:
        """One leader, the ISR is every replica, and every log ends at the leader's HW."""
        c = self.controller
        reg = c.reg
        leader = self.nodes.get(reg.leader)
        if leader is None or leader.leader is None or set(reg.isr) != set(REPLICAS):
            return False
        state = leader.leader
        if state.isr_state.in_flight or state.leader_epoch != reg.leader_epoch:
            return False
        end = leader.log.log_end_offset
        if state.high_watermark != end:
            return False
        return all(
            n.up
            and n.md_version == c.version
            and n.log.log_end_offset == end
            and n.log.hw == end
            and not n.produces
            for n in self.nodes.values()
        )

    def final_check(self) -> None:
        if self.settled_at < 0:
            c = self.controller
            states = {
                n.node_id: (
                    "up" if n.up else "down",
                    "leader" if n.leader else (n.follower.status.value if n.follower else "-"),
                    n.log.log_start_offset,
                    n.log.log_end_offset,
                    n.log.hw,
                    n.md_version,
                )
                for n in self.nodes.values()
            }
            self.fail(
                f"did not settle within {SETTLE_MS} ms of the heal: controller {c.reg} v{c.version}, "
                f"brokers {c.brokers}, nodes (status, start, end, hw, metadata) {states}"
            )
        logs = [n.log for n in self.nodes.values()]
        start = max(log.start for log in logs)
        end = logs[0].log_end_offset
        ref = logs[0].recs[start - logs[0].start :]
        for node in self.nodes.values():
            log = node.log
            if log.recs[start - log.start :] != ref:
                diff = next(
                    (
                        i
                        for i, (a, b) in enumerate(
                            zip(log.recs[start - log.start :], ref, strict=False)
                        )
                        if a != b
                    ),
                    min(len(ref), log.log_end_offset - start),
                )
                self.fail(f"n{node.node_id}'s log differs from n1's at offset {start + diff}")
        if len(self.committed) > end:
            self.fail(f"{len(self.committed)} records were committed but the logs end at {end}")
        for offset, rec in self.acked.items():
            if offset >= start and ref[offset - start] != rec:
                self.fail(
                    f"acknowledged {rec} at {offset} is lost: the logs hold {ref[offset - start]}"
                )
        for offset in range(start, len(self.committed)):
            want = self.committed[offset]
            if want is not None and ref[offset - start] != want:
                self.fail(f"committed {want} at {offset} is lost")
        self.stats["committed"] = len(self.committed)
        self.stats["settle_ms"] = self.settled_at - self.heal_at


def run_seed(seed: int, fault_ms: int = 3000, trace: bool = False) -> dict[str, int]:
    return Simulation(seed, fault_ms=fault_ms, trace=trace).run()


def main(argv: list[str] | None = None) -> int:
    return cli(
        __doc__ or "",
        lambda seed, args: run_seed(seed, args.fault_ms, args.trace),
        argv,
        default_fault_ms=3000,
        worst=("settle_ms",),
    )


if __name__ == "__main__":
    sys.exit(main())
