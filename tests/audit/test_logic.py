"""The audit's scanning and comparison, run in-process (no Spark)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from audit.records import RECORD_SIZE, iter_batches
from audit.scan_segments import scan_range
from audit.scan_text import DumpFormatError, parse_dump
from audit.tasks import Kind, ScanTask, Side
from protocol.records import Compression

from .conftest import audit_locally
from .layout import (
    EPOCH_SPLIT_BATCH,
    EXPECTED,
    FLIPPED_BATCH,
    LAG_BATCHES,
    T0,
    Spec,
    build_log,
    build_scenario,
    dump_text,
    dump_tree,
    flip_byte,
    kip_sample_lines,
    write_partition,
)

# The two batch lines KIP-1279 prints (section "Command-Line"), under its "Dumping" line.
KIP_LINES = [
    "Dumping /home/fvaleri/Documents/kafka/build/test/server4/data/__mirror_state-0/"
    "00000000000000000000.log",
    "Log starting offset: 0",
    "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1771239071191 size: 98 "
    "magic: 2 compresscodec: none crc: 3314855113 isvalid: true",
    "baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 98 CreateTime: 1771239071219 size: 98 "
    "magic: 2 compresscodec: none crc: 3968746657 isvalid: true",
]


def _offset_of(batch: bytes) -> int:
    return int.from_bytes(batch[:8], "big")


def _check_scenario(results: dict, logs: dict[str, list[bytes]]) -> None:
    log = logs["log"]
    assert {k: r.verdict for k, (r, _) in results.items()} == EXPECTED
    ident = results[("orders", 0)][0]
    assert ident.matched_batches == len(log) and ident.first_divergent_offset == -1
    assert ident.source_log_end == ident.destination_log_end
    lag = results[("orders", 1)][0]
    tail = log[-LAG_BATCHES:]
    assert lag.lag_batches == LAG_BATCHES
    assert lag.lag_records == sum(int.from_bytes(b[57:61], "big") for b in tail)
    assert lag.lag_bytes == sum(len(b) for b in tail)
    assert lag.lag_ms == LAG_BATCHES * 1000  # one second between batches
    assert lag.lag_offsets == lag.source_log_end - lag.destination_log_end > 0
    flipped, diffs = results[("orders", 2)]
    assert flipped.first_divergent_offset == _offset_of(log[FLIPPED_BATCH])
    assert flipped.different_batches == 1
    assert diffs[0]["fields"] == ["crc_check"]
    epochs = results[("orders", 3)][0]
    assert epochs.first_divergent_offset == _offset_of(log[EPOCH_SPLIT_BATCH])
    assert (epochs.diverged_epoch_source, epochs.diverged_epoch_destination) == (2, 7)
    missing = results[("audit-only-src", 0)][0]
    assert missing.missing_side == "destination"


@pytest.mark.parametrize("split_bytes", [1 << 20, 150])
def test_segment_scenario(tmp_path: Path, split_bytes: int) -> None:
    logs = build_scenario(tmp_path)
    _check_scenario(audit_locally(tmp_path / "src", tmp_path / "dst", split_bytes, ".*"), logs)


def test_dump_text_gives_the_same_answers(tmp_path: Path) -> None:
    logs = build_scenario(tmp_path)
    dump_tree(tmp_path / "src", tmp_path / "text-src" / "src.txt")
    dump_tree(tmp_path / "dst", tmp_path / "text-dst" / "dst.txt")
    both_text = audit_locally(tmp_path / "text-src", tmp_path / "text-dst", topics=".*")
    _check_scenario(both_text, logs)
    mixed = audit_locally(tmp_path / "text-src", tmp_path / "dst", topics=".*")
    _check_scenario(mixed, logs)


def test_default_topic_filter_skips_internal_topics(tmp_path: Path) -> None:
    log = build_log([Spec()] * 2)
    for side in ("src", "dst"):
        write_partition(tmp_path / side, "__consumer_offsets", 0, log)
        write_partition(tmp_path / side, "t", 0, log)
    assert set(audit_locally(tmp_path / "src", tmp_path / "dst")) == {("t", 0)}


def test_every_batch_is_owned_by_exactly_one_range(tmp_path: Path) -> None:
    log = build_log([Spec(records=k % 5 + 1) for k in range(40)])
    pdir = write_partition(tmp_path, "t", 0, log)
    seg = pdir / f"{0:020d}.log"
    size = seg.stat().st_size
    for split in (61, 97, 150, 1000, size):
        blobs = [
            scan_range(
                ScanTask(
                    Side.SOURCE, Kind.SEGMENT, str(seg), ".", "t", 0, 0, s, min(s + split, size)
                )
            ).blob
            for s in range(0, size, split)
        ]
        offsets = [b.base_offset for blob in blobs for b in iter_batches(blob)]
        assert offsets == [_offset_of(b) for b in log], split


def test_a_bad_index_entry_is_not_trusted(tmp_path: Path) -> None:
    log = build_log([Spec(records=3)] * 20)
    pdir = write_partition(tmp_path, "t", 0, log)
    seg = pdir / f"{0:020d}.log"
    # An index entry pointing into the middle of a batch (position 30).
    (pdir / f"{0:020d}.index").write_bytes(struct.pack(">ii", 5, 30))
    size = seg.stat().st_size
    start = len(log[0]) * 3 + 5
    chunk = scan_range(ScanTask(Side.SOURCE, Kind.SEGMENT, str(seg), ".", "t", 0, 0, start, size))
    assert [b.base_offset for b in iter_batches(chunk.blob)] == [_offset_of(b) for b in log[4:]]
    # A good entry is used and gives the same answer.
    pos = sum(len(b) for b in log[:2])
    (pdir / f"{0:020d}.index").write_bytes(struct.pack(">ii", 8, pos))
    again = scan_range(ScanTask(Side.SOURCE, Kind.SEGMENT, str(seg), ".", "t", 0, 0, start, size))
    assert again.blob == chunk.blob


def test_node_copies_merge_and_conflicts_are_counted(tmp_path: Path) -> None:
    log = build_log([Spec(records=2)] * 6)
    other = build_log([Spec(records=2)] * 4 + [Spec(records=2, epoch=5)] * 2)
    write_partition(tmp_path / "src" / "a", "t", 0, log[:3])
    write_partition(tmp_path / "src" / "b", "t", 0, log, 2)
    write_partition(tmp_path / "dst" / "x", "t", 0, log)
    write_partition(tmp_path / "dst" / "y", "t", 0, other)
    report, _ = audit_locally(tmp_path / "src", tmp_path / "dst")[("t", 0)]
    assert report.source_copies == ["a", "b"] and report.source_copy_conflicts == 0
    # y's higher-epoch batches win over x's at the same offsets.
    assert report.destination_copy_conflicts == 2
    assert report.verdict == "DIVERGED"
    assert report.first_divergent_offset == _offset_of(log[4])


def test_failover_marker_ends_the_mirrored_part(tmp_path: Path) -> None:
    log = build_log([Spec(records=2)] * 5 + [Spec(records=2)] * 3)
    mirrored = log[:5]
    after = build_log([Spec(pid_reset=True, epoch=4), Spec(records=3, epoch=4)], start=10)
    write_partition(tmp_path / "src", "t", 0, log)
    write_partition(tmp_path / "dst", "t", 0, mirrored + after)
    report, _ = audit_locally(tmp_path / "src", tmp_path / "dst")[("t", 0)]
    assert report.verdict == "LAGGING"
    assert report.failover_offset == 10 and report.post_failover_batches == 2
    assert report.destination_markers == [
        {"offset": 10, "epoch": 4, "source_cluster_id": "src-cluster"}
    ]


def test_open_transactions_gaps_and_epoch_history(tmp_path: Path) -> None:
    specs = [
        Spec(producer_id=3, transactional=True),
        Spec(producer_id=3, commit_marker=True),
        Spec(producer_id=4, transactional=True, epoch=1, gap_before=10),
        Spec(producer_id=3, transactional=True, epoch=2),
        Spec(producer_id=4, transactional=True, epoch=2),
    ]
    log = build_log(specs)
    for side in ("src", "dst"):
        write_partition(tmp_path / side, "t", 0, log, 2)
    report, _ = audit_locally(tmp_path / "src", tmp_path / "dst", split_bytes=100)[("t", 0)]
    assert report.verdict == "IDENTICAL"
    assert report.source_open_transactions == [
        {"producer_id": 3, "producer_epoch": 0, "first_offset": _offset_of(log[3])},
        {"producer_id": 4, "producer_epoch": 0, "first_offset": _offset_of(log[2])},
    ]
    assert report.source_gaps == [{"first": 4, "last": 13}]
    assert [e["epoch"] for e in report.source_epochs] == [0, 1, 2]


def test_destination_ahead_and_corrupt_framing_diverge(tmp_path: Path) -> None:
    log = build_log([Spec(records=2)] * 6)
    write_partition(tmp_path / "src", "t", 0, log[:4])
    write_partition(tmp_path / "src", "t", 1, log)
    write_partition(tmp_path / "dst", "t", 0, log)
    pdir = write_partition(tmp_path / "dst", "t", 1, log)
    # Break the batch_length of the fourth batch: the rest no longer parses.
    flip_byte(pdir / f"{0:020d}.log", sum(len(b) for b in log[:3]) + 8)
    results = audit_locally(tmp_path / "src", tmp_path / "dst")
    ahead = results[("t", 0)][0]
    assert ahead.verdict == "DIVERGED" and ahead.extra_batches == 2
    assert ahead.first_divergent_offset == _offset_of(log[4])
    corrupt = results[("t", 1)][0]
    assert corrupt.verdict == "DIVERGED"
    assert corrupt.first_divergent_offset == _offset_of(log[3])
    assert any("corrupt batch framing" in p for p in corrupt.problems)


def test_kip_sample_lines_parse() -> None:
    (section,) = parse_dump(KIP_LINES)
    assert (section.topic, section.partition, section.segment_base) == ("__mirror_state", 0, 0)
    assert section.log_dir.endswith("server4/data")
    batches = iter_batches(section.records)
    assert [(b.base_offset, b.last_offset, b.size, b.crc, b.max_timestamp) for b in batches] == [
        (0, 0, 98, 3314855113, 1771239071191),
        (1, 1, 98, 3968746657, 1771239071219),
    ]
    assert all(b.epoch == 0 and b.crc_ok and b.producer_id == -1 for b in batches)


def test_a_dump_quoted_in_prose_is_cut_out_and_parses(tmp_path: Path) -> None:
    """A dump as KIP-1279's "Command-Line" section quotes it: between prose, a record line
    (``| offset: ...``, with JSON key and payload) under each batch line."""
    records = [
        f"| offset: {i} CreateTime: {ts} keySize: 13 valueSize: 17 sequence: -1 headerKeys: [] "
        'key: {"type":"2","data":{"mirrorName":"my-mirror"}} '
        f'payload: {{"version":"0","data":{{"topicName":"my-topic","partition":0,"state":{i}}}}}'
        for i, ts in enumerate((1771239071191, 1771239071219))
    ]
    block = [*KIP_LINES[:3], records[0], KIP_LINES[3], records[1]]
    text = tmp_path / "kip.txt"
    prose_before = ["Command-Line", "A new dump flag decodes mirror metadata:", "$ bin/dump ..."]
    prose_after = ["A new command-line tool manages mirrors:"]
    text.write_text("\n".join([*prose_before, *block, *prose_after]) + "\n", encoding="utf-8")
    lines = kip_sample_lines(text)
    assert lines == block
    (section,) = parse_dump(lines)
    assert len(section.records) == 2 * RECORD_SIZE
    (without_record_lines,) = parse_dump(KIP_LINES)
    assert bytes(section.records) == bytes(without_record_lines.records)


def test_dump_lines_without_a_partition_path_are_refused() -> None:
    with pytest.raises(DumpFormatError, match="not under a 'Dumping"):
        list(parse_dump(["Dumping /tmp/x.log", KIP_LINES[2]]))
    with pytest.raises(DumpFormatError, match="lacks crc"):
        list(parse_dump([KIP_LINES[0], "baseOffset: 0 lastOffset: 0 count: 1 size: 98"]))


def test_text_and_segments_agree_on_compressed_and_control_batches(tmp_path: Path) -> None:
    specs = [
        Spec(compression=Compression.ZSTD, producer_id=1, transactional=True),
        Spec(producer_id=1, commit_marker=True),
        Spec(pid_reset=True),
    ]
    pdir = write_partition(tmp_path / "seg", "t", 0, build_log(specs))
    seg_blob = scan_range(
        ScanTask(Side.SOURCE, Kind.SEGMENT, str(pdir / f"{0:020d}.log"), ".", "t", 0, 0, 0, 1 << 20)
    ).blob
    for deep in (True, False):
        (section,) = parse_dump(dump_text(pdir, deep=deep).splitlines())
        assert bytes(section.records) == seg_blob
    assert iter_batches(seg_blob)[0].max_timestamp == T0
