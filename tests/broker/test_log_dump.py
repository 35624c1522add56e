"""kafka-dump-log output on a known log, checked line by line."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.cli import dump_log
from broker.log import AppendOrigin, LogConfig, ManualClock, PartitionLog
from protocol.records import (
    Compression,
    Record,
    build_batch,
    build_end_txn_marker,
    build_mirror_pid_reset,
)

from .log_helpers import fill, open_log

T0 = 1_700_000_000_000
ROOT = Path(__file__).resolve().parents[2]


def _known_log(tmp: Path) -> Path:
    plog = PartitionLog.open(tmp, "t", 0, uuid.UUID(int=7), LogConfig(), ManualClock(T0))
    plog.append_as_leader(
        build_batch(
            [
                Record(key=b"k1", value=b"hello", headers=(("h1", b"x"), ("h2", None))),
                Record(key=None, value=b"world", timestamp_delta=5),
            ],
            base_timestamp=T0,
        ),
        0,
        now_ms=T0,
    )
    plog.append_as_leader(
        build_batch(
            [Record(key=b"a", value=None)],
            base_timestamp=T0 + 10,
            compression=Compression.GZIP,
            producer_id=9,
            producer_epoch=2,
            base_sequence=3,
            is_transactional=True,
        ),
        1,
        now_ms=T0,
    )
    coord = AppendOrigin.COORDINATOR
    marker = build_end_txn_marker(
        True, producer_id=9, producer_epoch=2, coordinator_epoch=4, timestamp=T0 + 20
    )
    plog.append_as_leader(marker, 1, now_ms=T0, origin=coord)
    reset = build_mirror_pid_reset("src-cluster", timestamp=T0 + 30)
    plog.append_as_leader(reset, 1, now_ms=T0, origin=coord)
    plog.close()
    return plog.dir / "00000000000000000000.log"


BATCH_LINES = [
    "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000005 size: 96 magic: 2 "
    "compresscodec: none crc: 2554458834 isvalid: true",
    "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 3 lastSequence: 3 producerId: 9 "
    "producerEpoch: 2 partitionLeaderEpoch: 1 isTransactional: true isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 96 CreateTime: 1700000000010 size: 89 magic: 2 "
    "compresscodec: gzip crc: 939562412 isvalid: true",
    "baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 9 "
    "producerEpoch: 2 partitionLeaderEpoch: 1 isTransactional: true isControl: true "
    "deleteHorizonMs: OptionalLong.empty position: 185 CreateTime: 1700000000020 size: 78 magic: 2 "
    "compresscodec: none crc: 1487397539 isvalid: true",
    "baseOffset: 4 lastOffset: 4 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true "
    "deleteHorizonMs: OptionalLong.empty position: 263 CreateTime: 1700000000030 size: 87 magic: 2 "
    "compresscodec: none crc: 1870935901 isvalid: true",
]

RECORD_LINES = [
    "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: -1 "
    "headerKeys: [h1,h2] key: k1 payload: hello",
    "| offset: 1 CreateTime: 1700000000005 keySize: -1 valueSize: 5 sequence: -1 "
    "headerKeys: [] payload: world",
    "| offset: 2 CreateTime: 1700000000010 keySize: 1 valueSize: -1 sequence: 3 headerKeys: [] key: a",
    "| offset: 3 CreateTime: 1700000000020 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
    "endTxnMarker: COMMIT coordinatorEpoch: 4",
    "| offset: 4 CreateTime: 1700000000030 keySize: 4 valueSize: 15 sequence: -1 headerKeys: [] "
    "mirrorPidReset: sourceClusterId: src-cluster",
]


def test_dump_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _known_log(tmp_path)
    assert dump_log.main(["--files", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"Dumping {path}", "Log starting offset: 0", *BATCH_LINES]


def test_dump_print_data_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _known_log(tmp_path)
    assert dump_log.main(["--files", str(path), "--print-data-log"]) == 0
    out = capsys.readouterr().out.splitlines()
    b, r = BATCH_LINES, RECORD_LINES
    expected = [b[0], r[0], r[1], b[1], r[2], b[2], r[3], b[3], r[4]]
    assert out == [f"Dumping {path}", "Log starting offset: 0", *expected]


def test_dump_deep_iteration_without_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _known_log(tmp_path)
    dump_log.main(["--files", str(path), "--deep-iteration"])
    out = capsys.readouterr().out.splitlines()
    assert (
        out[3]
        == "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: [h1,h2]"
    )


def test_dump_reports_trailing_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _known_log(tmp_path)
    with path.open("ab") as fh:
        fh.write(b"\x00" * 20)
    dump_log.main(["--files", str(path)])
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "Found 20 invalid bytes at the end of 00000000000000000000.log"


def test_dump_indexes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plog = open_log(tmp_path)
    fill(plog, 12)
    seg = plog.active_segment
    entries = [seg.index.entry(i) for i in range(seg.index.entries)]
    tentries = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert entries and tentries
    # The active segment's entries reach its index files when it flushes.
    plog.flush()
    # Active segment, index still preallocated with zeros: the dump stops at the first zero.
    dump_log.main(["--files", f"{seg.index.path},{seg.time_index.path}"])
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines[0] == f"Dumping {seg.index.path}"
    assert lines[1 : 1 + len(entries)] == [f"offset: {o} position: {p}" for o, p in entries]
    assert lines[1 + len(entries)] == f"Dumping {seg.time_index.path}"
    assert lines[2 + len(entries) :] == [f"timestamp: {t} offset: {o}" for t, o in tentries]
    assert "Mismatches" not in cap.err


def test_bad_arguments_exit_1(tmp_path: Path) -> None:
    script = ROOT / "bin" / "kafka-dump-log.sh"
    res = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    assert res.returncode == 1
    assert "--files" in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "broker.cli.dump_log", "--files", "x.log", "--bogus"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert res.returncode == 1 and "--bogus" in res.stderr


def test_cluster_metadata_decoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Metadata segments and KRaft snapshots print their records as Kafka's decoder does."""
    import json

    from broker.quorum.metadata_log import MetadataLog, snapshot_name
    from broker.raft.messages import SnapshotId
    from protocol.metadata_records import encode_metadata_record, latest_type

    topic_id = uuid.UUID(int=7)
    plog = PartitionLog.open(
        tmp_path, "__cluster_metadata", 0, None, LogConfig(), ManualClock(0), clean_shutdown=True
    )
    log = MetadataLog(plog, lambda: 0)
    log.append_as_leader([b"\x00\x00"], 3, control=True)
    topic = latest_type("TopicRecord")(name="orders", topic_id=topic_id)
    log.append_as_leader([encode_metadata_record(topic), b"not a record"], 3)
    log.update_high_watermark(3)
    log.create_snapshot(SnapshotId(3, 3), encode_metadata_record(topic))
    plog.close()
    pdir = tmp_path / "__cluster_metadata-0"
    files = [str(pdir / "00000000000000000000.log"), str(pdir / snapshot_name(SnapshotId(3, 3)))]
    assert dump_log.main(["--cluster-metadata-decoder", "--files", ",".join(files)]) == 0
    out = capsys.readouterr().out
    payloads = [line.split(" payload: ", 1)[1] for line in out.splitlines() if " payload: " in line]
    want = {
        "type": "TOPIC_RECORD",
        "version": 0,
        "data": {"name": "orders", "topicId": "AAAAAAAAAAAAAAAAAAAABw"},
    }
    assert json.loads(payloads[0]) == want
    assert payloads[1].startswith("Error at 2, skipping. ")  # Kafka's words
    assert json.loads(payloads[2]) == want  # the snapshot's record
    assert "controlType: LEADER_CHANGE(2)" in out
    assert "controlType: SNAPSHOT_HEADER(3)" in out and "controlType: SNAPSHOT_FOOTER(4)" in out
