"""COMMIT/ABORT markers as other Kafka-compatible brokers write them: the type in the key and a
null (or short) value. The type comes from the key, as Kafka's ControlRecordType reads it; the
coordinator epoch is then unknown (-1). Producer state, the transaction index, recovery and
kafka-dump-log must all read them as markers.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from broker.cli import dump_log
from broker.log import ManualClock, PartitionLog, ProducerStateManager
from broker.log.producer_state import CompletedTxn
from protocol.errors import CorruptRecordError
from protocol.records import (
    UNKNOWN_COORDINATOR_EPOCH,
    BatchView,
    ControlRecord,
    ControlType,
    Record,
    build_batch,
    build_end_txn_marker,
    control_key,
    parse_control_record,
    read_control_batch,
)
from protocol.txn_index import AbortedTxn, decode_entries

from .log_helpers import T0, open_log

COMMIT_KEY = control_key(ControlType.COMMIT)
ABORT_KEY = control_key(ControlType.ABORT)


def foreign_marker(
    commit: bool, pid: int, offset: int, value: bytes | None = None, *, epoch: int = 0
) -> bytes:
    """A transactional control batch whose record has the marker key and ``value``."""
    return build_batch(
        [Record(key=COMMIT_KEY if commit else ABORT_KEY, value=value)],
        base_offset=offset,
        partition_leader_epoch=0,
        producer_id=pid,
        producer_epoch=epoch,
        is_transactional=True,
        is_control=True,
        base_timestamp=T0,
    )


def txn_data(pid: int, offset: int, n: int, seq: int = 0) -> bytes:
    return build_batch(
        [Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(n)],
        base_offset=offset,
        partition_leader_epoch=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
        base_timestamp=T0,
    )


SHORT_VALUES = [None, b"", b"\x00", b"\x00\x00", b"\x00\x00\x00\x00\x05"]


# -- the parser ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", SHORT_VALUES)
@pytest.mark.parametrize("commit", [True, False])
def test_the_type_comes_from_the_key_and_a_short_value_has_no_epoch(
    commit: bool, value: bytes | None
) -> None:
    key = COMMIT_KEY if commit else ABORT_KEY
    parsed = parse_control_record(key, value)
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    assert parsed == ControlRecord(kind, 0, None, coordinator_epoch=UNKNOWN_COORDINATOR_EPOCH)
    assert parsed.is_end_txn and parsed.is_known


def test_a_full_value_still_gives_its_epoch_and_a_corrupt_one_is_refused() -> None:
    assert parse_control_record(COMMIT_KEY, b"\x00\x00\x00\x00\x00\x07").coordinator_epoch == 7
    with pytest.raises(CorruptRecordError, match="negative version"):
        parse_control_record(ABORT_KEY, b"\xff\xff\x00\x00\x00\x07")


def test_read_control_batch() -> None:
    got = read_control_batch(BatchView(foreign_marker(True, 5, 0)))
    assert got is not None and got.type == ControlType.COMMIT
    assert got.coordinator_epoch == UNKNOWN_COORDINATOR_EPOCH
    unknown = build_batch([Record(key=control_key(99))], is_control=True)
    got = read_control_batch(BatchView(unknown))
    assert got is not None and got.type == 99 and not got.is_known and not got.is_end_txn
    keyless = build_batch([Record(key=None, value=b"x")], is_control=True)
    with pytest.raises(CorruptRecordError, match="got null"):
        read_control_batch(BatchView(keyless))


# -- producer state -----------------------------------------------------------------------------
@pytest.mark.parametrize("value", SHORT_VALUES)
@pytest.mark.parametrize("commit", [True, False])
def test_producer_state_ends_the_transaction(
    tmp_path: Path, commit: bool, value: bytes | None
) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0))
    psm.on_append(BatchView(txn_data(7, 0, 3)), 0)
    assert psm.last_stable_offset(3) == 0
    done = psm.on_append(BatchView(foreign_marker(commit, 7, 3, value)), 3)
    assert done == CompletedTxn(7, 0, 3, not commit, 4)
    assert psm.ongoing_transactions() == []
    assert psm.last_stable_offset(4) == 4
    entry = psm.last_entry(7)
    assert entry is not None and entry.current_txn_first_offset is None


def test_an_unknown_epoch_keeps_the_last_known_one_and_fences_nothing(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, ManualClock(T0))
    psm.on_append(BatchView(txn_data(7, 0, 1)), 0)
    known = build_end_txn_marker(
        True, producer_id=7, producer_epoch=0, coordinator_epoch=4, base_offset=1
    )
    psm.on_append(BatchView(known), 1)
    psm.on_append(BatchView(txn_data(7, 2, 1, seq=1)), 2)
    foreign = BatchView(foreign_marker(True, 7, 3))
    assert psm.check(foreign) is None  # an unknown epoch is not an older one
    assert psm.on_append(foreign, 3) == CompletedTxn(7, 2, 3, False, 4)
    entry = psm.last_entry(7)
    assert entry is not None and entry.coordinator_epoch == 4


# -- the log: transaction index, LSO, recovery ------------------------------------------------------
def _foreign_history() -> bytes:
    """pid 1: 0-2 COMMIT(null) 3; pid 2: 4-5 ABORT(null) 6; pid 1: 7 COMMIT(2 bytes) 8."""
    return b"".join(
        [
            txn_data(1, 0, 3),
            foreign_marker(True, 1, 3),
            txn_data(2, 4, 2),
            foreign_marker(False, 2, 6),
            txn_data(1, 7, 1, seq=3),
            foreign_marker(True, 1, 8, b"\x00\x00"),
        ]
    )


def _attach(plog: PartitionLog) -> ProducerStateManager:
    psm = ProducerStateManager(plog.dir, ManualClock(T0))
    plog.load_producer_state(psm)
    return psm


def _index(plog: PartitionLog) -> list[AbortedTxn]:
    out: list[AbortedTxn] = []
    for seg in plog.segments:
        if seg.txn_index.path.exists():
            out.extend(decode_entries(seg.txn_index.path.read_bytes())[0])
    return out


def test_a_mirrored_log_with_foreign_markers_is_stable(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "live")
    _attach(plog)
    plog.append_raw(_foreign_history(), now_ms=T0)  # as the mirror fetcher appends
    plog.high_watermark = plog.log_end_offset
    assert plog.log_end_offset == 9
    assert plog.last_stable_offset == 9
    assert _index(plog) == [AbortedTxn(2, 4, 6, 7)]
    assert plog.aborted_transactions(0, 9) == [AbortedTxn(2, 4, 6, 7)]

    # kill -9: no snapshot, no transaction index; recovery replays the markers.
    crashed = tmp_path / "crashed" / plog.dir.name
    shutil.copytree(plog.dir, crashed)
    for f in [*crashed.glob("*.snapshot"), *crashed.glob("*.txnindex")]:
        f.unlink()
    again = open_log(crashed.parent, clean_shutdown=False)
    psm = _attach(again)
    again.high_watermark = again.log_end_offset
    assert psm.ongoing_transactions() == []
    assert again.last_stable_offset == 9
    assert _index(again) == [AbortedTxn(2, 4, 6, 7)]


def test_dump_log_shows_the_marker(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append_raw(_foreign_history(), now_ms=T0)
    plog.flush()
    out, err = io.StringIO(), io.StringIO()
    dump_log.dump_log(plog.segments[0].log_path, print_data=False, deep=True, out=out, err=err)
    markers = [line for line in out.getvalue().splitlines() if "endTxnMarker" in line]
    assert len(markers) == 3, out.getvalue()
    assert markers[0].endswith(" endTxnMarker: COMMIT coordinatorEpoch: -1")
    assert markers[1].endswith(" endTxnMarker: ABORT coordinatorEpoch: -1")
    assert markers[2].endswith(" endTxnMarker: COMMIT coordinatorEpoch: -1")
    assert "INVALID" not in out.getvalue() and not err.getvalue()
