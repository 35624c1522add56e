"""Transactions in the log: the last stable offset and the aborted-transaction index through
leader appends, raw (mirror) appends, markers, HW moves, truncation, log start moves and
recovery with and without producer snapshots; what a READ_COMMITTED read returns."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import LogAppendError, ManualClock, PartitionLog, ProducerStateManager
from broker.log.errors import CORRUPT_MESSAGE
from broker.log.producer_state import INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED
from protocol.records import BatchView, build_end_txn_marker, scan_batches
from protocol.records.batch import CRC_OFFSET
from protocol.txn_index import AbortedTxn, decode_entries

from .log_helpers import T0, batch, open_log, small_config


def attach(plog: PartitionLog) -> ProducerStateManager:
    psm = ProducerStateManager(plog.dir, ManualClock(T0))
    plog.load_producer_state(psm)
    return psm


class Writer:
    """Appends as the partition leader, moving the HW to the log end like a single node."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.seq: dict[int, int] = defaultdict(int)

    def data(self, pid: int = -1, n: int = 1, *, txn: bool = True, epoch: int = 0) -> int:
        kw: dict[str, object] = {}
        if pid >= 0:
            kw = {
                "producer_id": pid,
                "producer_epoch": epoch,
                "base_sequence": self.seq[pid],
                "is_transactional": txn,
            }
            self.seq[pid] += n
        result = self.plog.append_as_leader(batch(n, **kw), 0, now_ms=T0)
        self.plog.high_watermark = self.plog.log_end_offset
        return result.first_offset

    def end(self, pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        result = self.plog.append_txn_marker(
            pid, epoch, coordinator_epoch, commit, leader_epoch=0, now_ms=T0
        )
        self.plog.high_watermark = self.plog.log_end_offset
        return result.first_offset


def all_batches(plog: PartitionLog) -> list[BatchView]:
    out: list[BatchView] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        result = plog.read(offset, 1 << 20, upper_bound=plog.log_end_offset)
        got = [b for buf in result.records for b in scan_batches(buf)]
        assert got, offset
        out.extend(got)
        offset = got[-1].last_offset + 1
    return out


def index_entries(plog: PartitionLog) -> list[AbortedTxn]:
    out: list[AbortedTxn] = []
    for seg in plog.segments:
        path = seg.txn_index.path
        if path.exists():
            out.extend(decode_entries(path.read_bytes())[0])
    return out


def committed_read(plog: PartitionLog, offset: int) -> tuple[list[int], list[tuple[int, int]]]:
    """(base offsets of the batches returned, aborted (pid, first offset)) of a READ_COMMITTED
    read from ``offset``, as Fetch does it."""
    result = plog.read(offset, 1 << 20, upper_bound=plog.last_stable_offset, aborted=True)
    bases = [b.base_offset for buf in result.records for b in scan_batches(buf)]
    assert result.aborted_transactions is not None
    return bases, [(t.producer_id, t.first_offset) for t in result.aborted_transactions]


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    log = open_log(tmp_path)
    attach(log)
    return log


def test_lso_through_open_abort_and_commit(plog: PartitionLog) -> None:
    w = Writer(plog)
    assert plog.last_stable_offset == 0 and plog.first_unstable_offset is None
    w.data(1, 2)  # 0-1: pid 1 opens a transaction
    w.data(2)  # 2: pid 2 opens one
    w.data()  # 3: plain data
    assert (plog.high_watermark, plog.last_stable_offset) == (4, 0)
    assert w.end(1, commit=False) == 4
    # pid 2 still open at 2: the LSO stops there and the index entry records it.
    assert plog.last_stable_offset == 2
    assert index_entries(plog) == [AbortedTxn(1, 0, 4, 2)]
    w.data(1)  # 5: a transactional batch after a marker starts a new transaction
    assert w.end(2, commit=True) == 6
    assert plog.last_stable_offset == 5
    assert w.end(1, commit=True) == 7
    assert plog.last_stable_offset == plog.high_watermark == 8
    assert index_entries(plog) == [AbortedTxn(1, 0, 4, 2)]  # commits are not indexed


def test_read_committed_stops_at_the_lso_and_lists_overlapping_aborts(
    plog: PartitionLog,
) -> None:
    w = Writer(plog)
    w.data()  # 0
    w.data(1, 2)  # 1-2  aborted
    w.data(2)  # 3    committed
    w.end(1, commit=False)  # 4
    w.end(2, commit=True)  # 5
    w.data(3)  # 6    aborted
    w.data()  # 7
    w.end(3, commit=False)  # 8
    w.data(4)  # 9    open
    w.data()  # 10
    assert plog.last_stable_offset == 9
    bases, aborted = committed_read(plog, 0)
    assert bases == [0, 1, 3, 4, 5, 6, 7, 8]  # everything below the LSO, markers included
    assert aborted == [(1, 1), (3, 6)]
    assert committed_read(plog, 5)[1] == [(3, 6)]  # pid 1's marker is behind the fetch
    assert committed_read(plog, 9) == ([], [])  # at the LSO: nothing to read
    assert plog.aborted_transactions(0, 1) == []  # [0, 1) touches neither
    assert plog.aborted_transactions(2, 3) == [AbortedTxn(1, 1, 4, 3)]  # pid 2 open at 3
    # READ_UNCOMMITTED reads past the LSO and asks for no list.
    uncommitted = plog.read(9, 1 << 20)
    assert uncommitted.aborted_transactions is None and uncommitted.records


def test_aborted_transactions_across_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"segment.bytes": "1024"}))
    attach(plog)
    w = Writer(plog)
    first = w.data(1)  # a long transaction, its data in the first segment
    while len(plog.segments) < 4:
        w.data()
    marker = w.end(1, commit=False)
    assert len(plog.segments) >= 4
    # The entry lives with the marker, in the last segment; earlier ones have no file.
    assert [s.txn_index.count for s in plog.segments] == [0] * (len(plog.segments) - 1) + [1]
    assert not plog.segments[0].txn_index.path.exists()
    assert plog.aborted_transactions(first, first + 1) == [AbortedTxn(1, first, marker, marker + 1)]
    assert committed_read(plog, first)[1] == [(1, first)]
    assert committed_read(plog, marker + 1)[1] == []


def test_hw_behind_the_marker_holds_the_lso(plog: PartitionLog) -> None:
    w = Writer(plog)
    w.data(1)
    plog.append_txn_marker(1, 0, 0, True, leader_epoch=0, now_ms=T0)  # HW not moved: at 1
    assert plog.high_watermark == 1 and plog.last_stable_offset == 0
    plog.high_watermark = 2
    assert plog.last_stable_offset == 2


def test_truncation_reopens_and_forgets_transactions(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"segment.bytes": "1024"}))
    attach(plog)
    w = Writer(plog)
    w.data(1)  # 0
    w.data(2)  # 1
    w.data()  # 2
    marker1 = w.end(1, commit=False)  # 3
    while len(plog.segments) < 3:  # rolls write producer snapshots
        w.data()
    marker2 = w.end(2, commit=False)
    assert [t.last_offset for t in index_entries(plog)] == [marker1, marker2]
    assert plog.last_stable_offset == plog.log_end_offset
    # Cut between the two markers: pid 2's abort is gone, its transaction open again.
    plog.truncate_to(marker2)
    assert [t.last_offset for t in index_entries(plog)] == [marker1]
    assert plog.last_stable_offset == 1
    assert plog.producer_state is not None
    assert [t.producer_id for t in plog.producer_state.ongoing_transactions()] == [2]
    # Cut below pid 1's marker: both transactions are open.
    plog.truncate_to(marker1)
    assert index_entries(plog) == [] and plog.last_stable_offset == 0
    plog.truncate_to(1)  # and below pid 2's first offset: only pid 1's
    assert plog.producer_state.ongoing_transactions()[0].producer_id == 1
    plog.truncate_fully_and_start_at(50)
    assert plog.last_stable_offset == 50 and plog.producer_state.ongoing_transactions() == []


def _history(w: Writer) -> None:
    """A transaction aborted while another is open, one committed, one aborted, one open."""
    w.data(1, 2)
    w.data(2)
    w.data()
    w.end(1, commit=False)
    w.data(3)
    w.end(2, commit=True)
    w.data(1)
    w.end(3, commit=False)
    w.end(1, commit=False)
    w.data(4, 2)  # left open
    w.data()


@pytest.mark.parametrize("with_snapshot", [False, True])
def test_recovery_rebuilds_the_index_and_the_lso(tmp_path: Path, with_snapshot: bool) -> None:
    config = small_config(**{"segment.bytes": "1024"})
    plog = open_log(tmp_path, config)
    attach(plog)
    w = Writer(plog)
    w.data(1, 2)
    w.data(2)
    w.end(1, commit=False)  # aborted while pid 2 is open: its entry's LSO is 2
    w.data(3)
    while len(plog.segments) < 2:  # the roll snapshots the producer state, pid 2 and 3 open
        w.data()
    plog.flush()  # the recovery point: what follows counts as unflushed
    recovery_point = plog.recovery_point
    w.end(2, commit=True)
    w.data(1)
    w.end(3, commit=False)
    w.end(1, commit=False)
    w.data(4, 2)  # left open
    w.data()
    entries = index_entries(plog)
    lso = plog.last_stable_offset
    assert len(entries) == 3 and lso == plog.log_end_offset - 3
    assert entries[0] == AbortedTxn(1, 0, 3, 2)
    # kill -9 with the last segment's index writes lost (never flushed).
    crashed = tmp_path / "crashed" / plog.dir.name
    shutil.copytree(plog.dir, crashed)
    assert sorted(crashed.glob("*.snapshot"))
    if not with_snapshot:
        for f in crashed.glob("*.snapshot"):
            f.unlink()
    last_index = crashed / plog.segments[-1].txn_index.path.name
    last_index.write_bytes(b"")
    again = open_log(crashed.parent, config, recovery_point=recovery_point, clean_shutdown=False)
    psm = attach(again)
    assert index_entries(again) == entries
    assert again.last_stable_offset == lso
    assert [t.producer_id for t in psm.ongoing_transactions()] == [4]
    assert committed_read(again, 0) == committed_read(plog, 0)


def test_clean_reopen_keeps_the_index_and_the_lso(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    psm = attach(plog)
    _history(Writer(plog))
    entries, lso = index_entries(plog), plog.last_stable_offset
    psm.take_snapshot()
    plog.close()
    again = open_log(tmp_path, clean_shutdown=True)
    assert attach(again) is again.producer_state
    assert index_entries(again) == entries and again.last_stable_offset == lso
    assert [t.producer_id for t in again.producer_state.ongoing_transactions()] == [4]


def test_a_corrupt_index_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    psm = attach(plog)
    _history(Writer(plog))
    entries = index_entries(plog)
    psm.take_snapshot()
    plog.close()
    (index_file,) = plog.dir.glob("*.txnindex")
    index_file.write_bytes(index_file.read_bytes()[:40])  # one entry and a torn one
    again = open_log(tmp_path, clean_shutdown=True)
    attach(again)
    assert index_entries(again) == entries


def test_log_start_past_an_open_transaction(plog: PartitionLog) -> None:
    w = Writer(plog)
    w.data(1)  # 0
    w.data()  # 1
    w.data()  # 2
    assert plog.last_stable_offset == 0
    plog.delete_records_before(2)
    assert plog.last_stable_offset == 2  # never below the log start (as Kafka)


def test_retention_deletes_the_index_with_its_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"segment.bytes": "1024"}))
    attach(plog)
    w = Writer(plog)
    w.data(1)
    w.end(1, commit=False)
    while len(plog.segments) < 3:
        w.data()
    first = plog.segments[0].txn_index.path
    assert first.exists()
    plog.delete_records_before(plog.segments[1].base_offset)
    plog.purge_deleted_files(0, force=True)
    assert not first.exists() and not first.with_name(first.name + ".deleted").exists()
    assert plog.aborted_transactions(plog.log_start_offset, plog.log_end_offset) == []


def test_marker_fencing(plog: PartitionLog) -> None:
    w = Writer(plog)
    w.data(1, epoch=3)
    w.end(1, commit=True, epoch=3, coordinator_epoch=5)
    with pytest.raises(LogAppendError) as older_epoch:
        w.end(1, commit=False, epoch=2, coordinator_epoch=5)
    assert older_epoch.value.error_code == INVALID_PRODUCER_EPOCH
    with pytest.raises(LogAppendError) as older_coordinator:
        w.end(1, commit=False, epoch=3, coordinator_epoch=4)
    assert older_coordinator.value.error_code == TRANSACTION_COORDINATOR_FENCED
    # An abort under a bumped epoch (the coordinator fencing the producer) is accepted, and
    # then the old epoch's data is refused.
    w.end(1, commit=False, epoch=4, coordinator_epoch=5)
    with pytest.raises(LogAppendError) as fenced:
        w.data(1, epoch=3)
    assert fenced.value.error_code == INVALID_PRODUCER_EPOCH


def _at(raw: bytes, offset: int) -> bytes:
    buf = bytearray(raw)
    buf[0:8] = offset.to_bytes(8, "big", signed=True)  # not covered by the CRC
    return bytes(buf)


def test_raw_appends_track_transactions_like_leader_appends(tmp_path: Path) -> None:
    """What a mirror does: the source's batches at the source's offsets, markers included."""
    source = open_log(tmp_path / "source")
    attach(source)
    _history(Writer(source))
    dest = open_log(tmp_path / "dest")
    attach(dest)
    for b in all_batches(source):
        dest.append_raw(b.raw, now_ms=T0)
        dest.high_watermark = dest.log_end_offset
    assert dest.last_stable_offset == source.last_stable_offset < dest.log_end_offset
    assert index_entries(dest) == index_entries(source)
    assert committed_read(dest, 0) == committed_read(source, 0)


def test_raw_append_accepts_a_marker_without_crc(plog: PartitionLog) -> None:
    # librdkafka's mock cluster writes its markers with CRC 0.
    w = Writer(plog)
    w.data(7)
    marker = bytearray(
        _at(build_end_txn_marker(False, producer_id=7, producer_epoch=0, coordinator_epoch=0), 1)
    )
    marker[CRC_OFFSET : CRC_OFFSET + 4] = b"\x00\x00\x00\x00"
    plog.append_raw(bytes(marker), now_ms=T0)
    plog.high_watermark = plog.log_end_offset
    assert plog.last_stable_offset == 2
    assert index_entries(plog) == [AbortedTxn(7, 0, 1, 2)]
    stored = [b for buf in plog.read(1, 1 << 20).records for b in scan_batches(buf)]
    assert stored[0].is_control and stored[0].crc_ok()  # filled in: the log stays valid
    # A data batch with CRC 0 (or any batch with a wrong CRC) is still corrupt.
    bad = bytearray(_at(batch(1), 2))
    bad[CRC_OFFSET : CRC_OFFSET + 4] = b"\x00\x00\x00\x00"
    with pytest.raises(LogAppendError) as info:
        plog.append_raw(bytes(bad), now_ms=T0)
    assert info.value.error_code == CORRUPT_MESSAGE and "CRC32C mismatch" in info.value.message


# -- a model -------------------------------------------------------------------------------
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(-1, 3)),  # -1: no producer id
        st.tuples(st.just("commit"), st.integers(1, 3)),
        st.tuples(st.just("abort"), st.integers(1, 3)),
        st.tuples(st.just("roll"), st.just(0)),
    ),
    max_size=30,
)


def _model(ops: list[tuple[str, int, int]]) -> tuple[int, list[tuple[int, int, int, int]]]:
    """(LSO, aborted (pid, first, marker, LSO after it)) of ops given with their offsets,
    HW = log end."""
    open_txns: dict[int, int] = {}
    aborted: list[tuple[int, int, int, int]] = []
    end = 0
    for kind, pid, offset in ops:
        if kind == "data":
            if pid >= 0 and pid not in open_txns:
                open_txns[pid] = offset
            end = offset + 1
        elif kind in ("commit", "abort"):
            first = open_txns.pop(pid, None)
            if kind == "abort" and first is not None:
                lso = min(open_txns.values(), default=offset + 1)
                aborted.append((pid, first, offset, lso))
            end = offset + 1
    return min(open_txns.values(), default=end), aborted


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, cut=st.integers(0, 30), data=st.data())
def test_lso_and_aborts_match_a_model(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[str, int]],
    cut: int,
    data: st.DataObject,
) -> None:
    base = tmp_path_factory.mktemp("model")
    plog = open_log(base, small_config(**{"segment.bytes": "2048"}))
    attach(plog)
    w = Writer(plog)
    done: list[tuple[str, int, int]] = []
    for kind, pid in ops:
        if kind == "data":
            done.append((kind, pid, w.data(pid)))
        elif kind == "roll":
            plog.roll()
        else:
            done.append((kind, pid, w.end(pid, commit=kind == "commit")))

    def check(log: PartitionLog, upto: list[tuple[str, int, int]]) -> None:
        lso, aborted = _model(upto)
        assert log.last_stable_offset == lso
        assert [tuple(t[:4]) for t in index_entries(log)] == aborted
        for _ in range(3):
            lo = data.draw(st.integers(log.log_start_offset, log.log_end_offset))
            hi = data.draw(st.integers(lo, log.log_end_offset + 1))
            got = [tuple(t[:4]) for t in log.aborted_transactions(lo, hi)]
            assert got == [a for a in aborted if a[2] >= lo and a[1] < hi]

    check(plog, done)
    # Recovery from scratch (no snapshot, every index file lost) gives the same answers.
    copy = base / "copy"
    shutil.copytree(plog.dir, copy / plog.dir.name)
    for f in (copy / plog.dir.name).glob("*.snapshot"):
        f.unlink()
    for f in (copy / plog.dir.name).glob("*.txnindex"):
        f.unlink()
    recovered = open_log(copy, small_config(**{"segment.bytes": "2048"}), clean_shutdown=False)
    attach(recovered)
    check(recovered, done)
    # Truncation at an op boundary.
    if done:
        k = min(cut, len(done) - 1)
        plog.truncate_to(done[k][2])
        check(plog, done[:k])


def test_what_produce_verification_reads(plog: PartitionLog) -> None:
    """KIP-890: Produce asks the coordinator only for a batch that would open a transaction, and
    a marker applied meanwhile shows in ``markers_applied``."""
    psm = plog.producer_state
    assert psm is not None
    w = Writer(plog)
    assert not psm.in_transaction(1, 0)
    w.data(1)
    assert (
        psm.in_transaction(1, 0) and not psm.in_transaction(1, 1) and not psm.in_transaction(2, 0)
    )
    before = psm.markers_applied
    w.end(1, commit=True)
    assert psm.markers_applied == before + 1
    assert not psm.in_transaction(1, 0)  # the next transactional batch is verified again
