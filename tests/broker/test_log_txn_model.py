"""A model-based test of the transaction side of the log.

A hypothesis state machine drives a ``PartitionLog`` (small segments, so rolls happen) with
transactional data of several producers, COMMIT/ABORT markers (some bumping the epoch, as a
coordinator fencing a producer does), plain and idempotent data, high-watermark moves lagging
the log end, rolls, follower truncation, DeleteRecords and size retention, clean reopen and
crash reopen (producer snapshots lost, a torn active segment, a lost active .txnindex). A plain
list of ``Entry`` rows is the reference; after every step the log must agree with it on the
offsets, the first unstable offset, the last stable offset (min(HW, first offset of the oldest
open transaction or ended one whose marker the HW has not passed), never below the log start),
the .txnindex entries, the aborted transactions ``aborted_transactions`` and READ_COMMITTED
reads return (Kafka: every aborted transaction whose [first offset, marker] overlaps the
fetched range), and READ_COMMITTED reads never return a record at or past the LSO.

Two latitudes are granted, as Kafka grants them; after each producer-state reload (truncation,
reopen, recovery) the model asks the log which way it went:

- a transaction whose data all lies below the log start may be forgotten (the replay starts at
  the log start); nothing of it is readable any more, so a consumer cannot tell;
- an ended transaction whose marker the HW has not passed may stop holding the LSO back (Kafka's
  ``truncateAndReload`` clears its unreplicated transactions; snapshots do not keep them): its
  marker is in the log and an aborted one is in the .txnindex, so consumers still drop it.

Below: regression tests for what the model found.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from broker.log import LogConfig, ManualClock, PartitionLog, ProducerStateManager
from broker.log.producer_state_loader import snapshot_producer_state
from protocol.records import build_end_txn_marker, scan_batches, set_base_offset
from protocol.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from protocol.txn_index import AbortedTxn, decode_entries

from .log_helpers import T0, batch, open_log, small_config

TXN_PIDS = (1, 2, 3)
IDEMPOTENT_PID = 10
SEGMENT_BYTES = "1024"
# Transactional producers open transactions, 10 is idempotent only, -1 has no producer id;
# transactional ones are listed twice: most batches should be transactional.
PIDS = st.sampled_from((-1, IDEMPOTENT_PID, *TXN_PIDS, *TXN_PIDS))


@dataclass(frozen=True)
class Entry:
    """One batch of the reference log."""

    base: int
    last: int
    kind: str  # "plain" | "txn" | "commit" | "abort"
    pid: int = -1
    epoch: int = 0
    seq: int = -1  # first sequence (data batches of a producer)


@dataclass(frozen=True)
class Txn:
    pid: int
    first: int
    marker: int | None  # None: still open
    aborted: bool
    batches: tuple[tuple[int, int], ...]  # (base, last) of its data batches
    lso: int  # for an ended one: the LSO its index entry records

    def first_from(self, log_start: int) -> int | None:
        """Its first offset as a replay from ``log_start`` sees it: the base of its first batch
        reaching the log start (None: all below, a replay misses it)."""
        return next((b for b, last in self.batches if last >= log_start), None)


@dataclass(frozen=True)
class Rebase:
    """At a reload the log saw an open transaction start later (its first batches were below
    the log start, the replay missed them) or not at all (``first`` None)."""

    pid: int
    old_first: int
    first: int | None
    at: int  # the log end then


def derive(entries: list[Entry], rebases: list[Rebase]) -> list[Txn]:
    """Every transaction of the reference log, in order of first offset."""
    open_: dict[int, tuple[int, list[tuple[int, int]]]] = {}  # pid -> (first, batches)
    done: list[Txn] = []

    def rebase_before(offset: int) -> None:
        for r in rebases:
            if r.at <= offset and r.pid in open_ and open_[r.pid][0] == r.old_first:
                if r.first is None:
                    del open_[r.pid]
                else:
                    open_[r.pid] = (r.first, open_[r.pid][1])

    for e in entries:
        rebase_before(e.base)
        if e.kind == "txn":
            open_.setdefault(e.pid, (e.base, []))[1].append((e.base, e.last))
        elif e.kind in ("commit", "abort") and e.pid in open_:
            first, batches = open_.pop(e.pid)
            lso = min((f for f, _ in open_.values()), default=e.base + 1)
            done.append(Txn(e.pid, first, e.base, e.kind == "abort", tuple(batches), lso))
    rebase_before(entries[-1].last + 1 if entries else 0)
    txns = done + [Txn(p, f, None, False, tuple(b), -1) for p, (f, b) in open_.items()]
    return sorted(txns, key=lambda t: t.first)


def attach(plog: PartitionLog) -> ProducerStateManager:
    psm = ProducerStateManager(plog.dir, ManualClock(T0))
    plog.load_producer_state(psm)
    return psm


def index_entries(plog: PartitionLog) -> list[AbortedTxn]:
    out: list[AbortedTxn] = []
    for seg in plog.segments:
        path = seg.txn_index.path
        if path.exists():
            out.extend(decode_entries(path.read_bytes())[0])
    return out


class TxnLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="txnmodel-"))
        self.config: LogConfig = small_config(**{"segment.bytes": SEGMENT_BYTES})
        self.plog = open_log(self.base, self.config)
        attach(self.plog)
        self.entries: list[Entry] = []
        self.rebases: list[Rebase] = []
        self.released: set[tuple[int, int, int]] = set()  # (pid, first, marker)
        self.hw = 0
        self.log_start = 0
        self.raw = False
        # What recovery-point-offset-checkpoint holds: written by the recovery checkpoint and
        # a clean close only, so after a truncation it may lie above the log's own point.
        self.file_recovery_point = 0

    def teardown(self) -> None:
        self.plog.close_handles()
        shutil.rmtree(self.base, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------
    @property
    def leo(self) -> int:
        return self.entries[-1].last + 1 if self.entries else self.log_start

    def boundaries(self, lo: int, hi: int) -> list[int]:
        """Batch boundaries in [lo, hi]."""
        out = sorted({e.base for e in self.entries} | {self.leo})
        return [o for o in out if lo <= o <= hi]

    def producer(self, pid: int) -> tuple[int, int]:
        """(epoch, next sequence) of ``pid`` as the log knows it."""
        epoch, seq = 0, 0
        for e in self.entries:
            if e.pid != pid:
                continue
            if e.epoch != epoch:
                epoch, seq = e.epoch, 0
            if e.kind in ("txn", "plain"):
                seq = e.seq + (e.last - e.base) + 1
        return epoch, seq

    def next_sequence(self, pid: int) -> tuple[int, int]:
        """(epoch, sequence) for the next batch of ``pid``. A producer whose batches all lie
        below the log start may be gone from the producer state (a reload replays from the log
        start; Kafka too): then the client goes by what the broker says, as after an
        OUT_OF_ORDER_SEQUENCE_NUMBER. Otherwise the log must know what the model knows."""
        epoch, seq = self.producer(pid)
        psm = self.plog.producer_state
        assert psm is not None
        entry = psm.last_entry(pid)
        if any(e.pid == pid and e.seq >= 0 and e.last >= self.log_start for e in self.entries):
            assert entry is not None, pid
            assert (entry.producer_epoch, entry.last_seq + 1) == (epoch, seq), (pid, entry)
        elif entry is not None and entry.producer_epoch == epoch:
            seq = entry.last_seq + 1
        return epoch, seq

    def txns(self) -> list[Txn]:
        return derive(self.entries, self.rebases)

    def append(self, data: bytes, kind: str, pid: int, epoch: int, seq: int, n: int) -> None:
        leo = self.leo
        if self.raw:
            buf = bytearray(data)
            set_base_offset(buf, 0, leo)
            result = self.plog.append_raw(bytes(buf), now_ms=T0)
        elif kind in ("commit", "abort"):
            result = self.plog.append_txn_marker(
                pid, epoch, 0, kind == "commit", leader_epoch=0, now_ms=T0
            )
        else:
            result = self.plog.append_as_leader(data, 0, now_ms=T0)
        assert not result.duplicate
        assert (result.first_offset, result.last_offset) == (leo, leo + n - 1)
        self.entries.append(Entry(leo, leo + n - 1, kind, pid, epoch, seq))

    def after_reload(self) -> None:
        """After a producer-state reload, take the latitudes of the module docstring: which open
        transactions reaching below the log start did the log see start later (or not at all),
        which unreplicated ones did it release?"""
        self.rebases = [r for r in self.rebases if r.at <= self.leo]
        psm = self.plog.producer_state
        assert psm is not None
        ongoing = {t.producer_id: t.first_offset for t in psm.ongoing_transactions()}
        for t in self.txns():
            if t.marker is None and t.first < self.log_start and ongoing.get(t.pid) != t.first:
                later = t.first_from(self.log_start)
                assert ongoing.get(t.pid) == later, (t, ongoing)
                self.rebases.append(Rebase(t.pid, t.first, later, self.leo))
        unreplicated = psm.transactions.ended()

        def held(t: Txn) -> bool:
            # the log keys an unreplicated transaction by the first offset its replay saw: one
            # reaching below the log start is seen from its first batch at or above it, or
            # from its true first offset when a producer snapshot still held it open
            keys = {t.first, t.first_from(self.log_start)}
            return any(unreplicated.get(k, (None, None))[0] == t.pid for k in keys)

        self.released = {
            (t.pid, t.first, t.marker)
            for t in self.txns()
            if t.marker is not None and t.marker >= self.hw and not held(t)
        }

    # -- rules -------------------------------------------------------------------------
    @initialize(raw=st.booleans())
    def mode(self, raw: bool) -> None:
        self.raw = raw  # appends as a mirror/follower does: the batches' own offsets

    def write(self, pid: int, n: int, follow: bool) -> None:
        if pid == -1:
            self.append(batch(n, tag=self.leo), "plain", -1, 0, -1, n)
        else:
            epoch, seq = self.next_sequence(pid)
            txn = pid != IDEMPOTENT_PID
            raw = batch(
                n,
                tag=self.leo,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                is_transactional=txn,
            )
            self.append(raw, "txn" if txn else "plain", pid, epoch, seq, n)
        if follow:
            self.set_hw(self.leo)

    def end_txn(self, pid: int, commit: bool, bump: bool, follow: bool) -> None:
        epoch = self.producer(pid)[0] + (1 if bump else 0)
        marker = build_end_txn_marker(
            commit, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp=T0
        )
        self.append(marker, "commit" if commit else "abort", pid, epoch, -1, 1)
        if follow:
            self.set_hw(self.leo)

    def set_hw(self, offset: int) -> None:
        self.hw = offset
        self.plog.high_watermark = offset

    # Appends are listed twice: hypothesis picks rules uniformly, and the interesting states
    # (several open transactions, aborts across segments) need many appends between the rest.
    # ``follow``: the HW follows the append (a single replica), else it lags.
    @rule(pid=PIDS, n=st.integers(1, 3), follow=st.booleans())
    def data(self, pid: int, n: int, follow: bool) -> None:
        self.write(pid, n, follow)

    @rule(pid=PIDS, n=st.integers(1, 3), follow=st.booleans())
    def more_data(self, pid: int, n: int, follow: bool) -> None:
        self.write(pid, n, follow)

    @rule(
        pid=st.sampled_from(TXN_PIDS),
        commit=st.booleans(),
        bump=st.booleans(),
        follow=st.booleans(),
    )
    def end(self, pid: int, commit: bool, bump: bool, follow: bool) -> None:
        self.end_txn(pid, commit, bump, follow)

    @rule(pid=st.sampled_from(TXN_PIDS), commit=st.booleans(), follow=st.booleans())
    def more_end(self, pid: int, commit: bool, follow: bool) -> None:
        self.end_txn(pid, commit, False, follow)

    @rule(frac=st.floats(0, 1))
    def advance_hw(self, frac: float) -> None:
        choices = self.boundaries(self.hw, self.leo)
        self.set_hw(choices[min(int(frac * len(choices)), len(choices) - 1)])

    @rule()
    def roll(self) -> None:
        self.plog.roll()

    @rule()
    def flush(self) -> None:
        self.plog.flush()

    @rule()
    def recovery_checkpoint(self) -> None:
        """The periodic recovery checkpoint: fsync and snapshot, then the file is written."""
        self.plog.checkpoint_recovery()
        self.file_recovery_point = self.plog.recovery_point

    @rule(frac=st.floats(0, 1))
    def truncate(self, frac: float) -> None:
        """A follower truncating to the leader's epoch end."""
        choices = self.boundaries(self.log_start, self.leo)
        to = choices[min(int(frac * len(choices)), len(choices) - 1)]
        self.plog.truncate_to(to)
        self.entries = [e for e in self.entries if e.last < to]
        self.hw = min(self.hw, to)
        self.after_reload()

    @rule(frac=st.floats(0, 1))
    def delete_records(self, frac: float) -> None:
        """DeleteRecords to any offset up to the HW, mid-batch ones included."""
        to = self.log_start + int(frac * (self.hw - self.log_start))
        assert self.plog.delete_records_before(to) == to
        self.log_start = to

    @rule(keep=st.integers(0, 3000))
    def retention(self, keep: int) -> None:
        """Size retention: whole segments below the HW go, the log start moves to the next."""
        self.plog.update_config(
            small_config(**{"segment.bytes": SEGMENT_BYTES, "retention.bytes": str(keep)})
        )
        self.plog.delete_old_segments(T0)
        self.plog.update_config(self.config)
        start = self.plog.log_start_offset
        assert self.log_start <= start <= self.hw
        assert start == self.log_start or start in self.boundaries(start, start)
        self.log_start = start

    @rule()
    def reopen_clean(self) -> None:
        snapshot_producer_state(self.plog)  # what the broker does at shutdown
        self.plog.close()
        self.file_recovery_point = self.plog.recovery_point
        self.plog = open_log(
            self.base,
            self.config,
            clean_shutdown=True,
            recovery_point=self.plog.recovery_point,
            log_start_offset=self.log_start,
            high_watermark=self.hw,
        )
        attach(self.plog)
        self.after_reload()

    @rule(lose_snapshots=st.booleans(), cut=st.integers(0, 400), lose_txn_index=st.booleans())
    def crash(self, lose_snapshots: bool, cut: int, lose_txn_index: bool) -> None:
        """kill -9: snapshots, the active segment's tail and its .txnindex entries written
        since the last flush may be lost (a flush fsyncs the file, and its directory when the
        file is new: the entries below the recovery point survive)."""
        plog = self.plog
        active = plog.active_segment
        headers = list(active.headers())
        recovery_point = plog.recovery_point
        plog.close_handles()
        if lose_snapshots:
            for f in plog.dir.glob("*.snapshot"):
                f.unlink()
        if lose_txn_index:
            path = active.txn_index.path
            kept = [t for t in active.txn_index.entries() if t.last_offset < recovery_point]
            if kept:
                path.write_bytes(path.read_bytes()[: len(kept) * TXN_ENTRY_SIZE])
            else:
                path.unlink(missing_ok=True)
        size = active.log_path.stat().st_size
        # Batches below the log start or the recovery point were durable: never cut.
        floor = max(self.log_start, recovery_point)
        durable = [h.position + h.size for h in headers if h.base_offset < floor]
        new_size = max(size - cut, max(durable, default=0))
        if new_size < size:
            with active.log_path.open("r+b") as fh:
                fh.truncate(new_size)
            lost = [h for h in headers if h.position + h.size > new_size]
            if lost:
                cut_at = lost[0].base_offset
                self.entries = [e for e in self.entries if e.last < cut_at]
        self.hw = min(self.hw, self.leo)
        self.plog = open_log(
            self.base,
            self.config,
            clean_shutdown=False,
            recovery_point=self.file_recovery_point,
            log_start_offset=self.log_start,
            high_watermark=self.hw,
        )
        attach(self.plog)
        self.after_reload()

    # -- invariants --------------------------------------------------------------------
    def expected_fuo(self) -> int | None:
        held = [
            t.first
            for t in self.txns()
            if t.marker is None
            or (t.marker >= self.hw and (t.pid, t.first, t.marker) not in self.released)
        ]
        return None if not held else max(min(held), self.log_start)

    @invariant()
    def offsets_agree(self) -> None:
        plog = self.plog
        assert (plog.log_start_offset, plog.high_watermark, plog.log_end_offset) == (
            self.log_start,
            self.hw,
            self.leo,
        )

    @invariant()
    def lso_agrees(self) -> None:
        fuo = self.expected_fuo()
        assert self.plog.first_unstable_offset == fuo
        lso = self.hw if fuo is None else min(self.hw, fuo)
        assert self.plog.last_stable_offset == lso

    def aborted_by_marker(self) -> dict[tuple[int, int], Txn]:
        return {(t.pid, t.marker): t for t in self.txns() if t.aborted and t.marker is not None}

    def check_entry(self, got: AbortedTxn, model: dict[tuple[int, int], Txn]) -> None:
        """An index entry the log returned is one of the model's aborted transactions. Below
        the log start the log may know a later first offset (and so a later LSO): the one a
        replay from this or any earlier log start saw (an index rebuilt after a crash keeps
        the log start of its rebuild when DeleteRecords moves it later)."""
        t = model.get((got.producer_id, got.last_offset))
        assert t is not None, (got, model)
        latest = t.first_from(self.log_start)
        seen = {b for b, _last in t.batches if latest is None or b <= latest}
        assert got.first_offset in {t.first, *seen}, (got, t)
        if t.lso >= self.log_start:
            assert got.last_stable_offset == t.lso, (got, t)
        else:
            assert t.lso <= got.last_stable_offset <= t.marker + 1, (got, t)

    @invariant()
    def txn_index_agrees(self) -> None:
        model = self.aborted_by_marker()
        got = [e for e in index_entries(self.plog) if e.last_offset >= self.log_start]
        assert [e.last_offset for e in got] == sorted({e.last_offset for e in got})
        for e in got:
            self.check_entry(e, model)
        keys = {(e.producer_id, e.last_offset) for e in got}
        for key, t in model.items():
            if key[1] >= self.log_start and t.first_from(self.log_start) is not None:
                assert key in keys, (t, got)

    def check_aborted(self, got: list[AbortedTxn], lo: int, hi: int) -> None:
        """``got`` lists the aborted transactions overlapping [lo, hi), each once (Kafka's
        collectAbortedTransactions). One whose data below ``hi`` lies below the log start may
        be missing: no consumer can tell."""
        model = self.aborted_by_marker()
        for t in got:
            self.check_entry(t, model)
        keys = [(t.producer_id, t.last_offset) for t in got]
        assert len(keys) == len(set(keys)), got
        may = {
            k for k, t in model.items() if t.marker is not None and t.marker >= lo and t.first < hi
        }
        must = set()
        for k, t in model.items():
            first = t.first_from(self.log_start)
            if k[1] >= lo and first is not None and first < hi:
                must.add(k)
        assert must <= set(keys) <= may, (lo, hi, got, must, may)

    @invariant()
    def aborted_transactions_agree(self) -> None:
        points = self.boundaries(self.log_start, self.leo)
        for lo in [*points[::2], self.log_start]:
            for hi in (lo + 1, self.plog.last_stable_offset, self.leo):
                if hi > lo:
                    self.check_aborted(self.plog.aborted_transactions(lo, hi), lo, hi)

    @invariant()
    def read_committed_agrees(self) -> None:
        """A READ_COMMITTED consumer from every batch boundary (and the log start) up to the
        LSO: exactly the batches ending below the LSO, with the overlapping aborts."""
        plog = self.plog
        lso = plog.last_stable_offset
        starts = [*self.boundaries(self.log_start, lso), self.log_start]
        for start in starts:
            offset = start
            seen: list[int] = []
            for _ in range(len(self.entries) + 2):
                if offset >= lso:
                    break
                result = plog.read(offset, 1 << 20, upper_bound=lso, aborted=True)
                got = [b for buf in result.records for b in scan_batches(buf)]
                assert result.aborted_transactions is not None
                if not got:
                    assert result.aborted_transactions == []
                    break
                assert all(b.last_offset < lso for b in got), (offset, lso)
                end = got[-1].last_offset + 1
                self.check_aborted(result.aborted_transactions, offset, end)
                seen.extend(b.base_offset for b in got)
                offset = end
            want = [e.base for e in self.entries if e.last >= start and e.last < lso]
            assert seen == want, (start, lso)


TxnLogMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_txn_log_model = TxnLogMachine.TestCase
