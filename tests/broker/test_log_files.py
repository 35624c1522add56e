"""Checkpoint files, partition.metadata, LogConfig, the epoch cache and the log manager."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log import LeaderEpochCache, LogConfig, LogManager, ManualClock
from broker.log.checkpoint import (
    CheckpointError,
    read_epoch_checkpoint,
    read_offset_checkpoint,
    read_partition_metadata,
    topic_id_from_str,
    topic_id_to_str,
    write_epoch_checkpoint,
    write_offset_checkpoint,
    write_partition_metadata,
)
from broker.log.manager import LogSchedule

from .log_helpers import T0, TOPIC_ID, batch, small_config


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("b-topic", 1): 42, ("a.topic-x", 0): 7})
    assert path.read_text() == "0\n2\na.topic-x 0 7\nb-topic 1 42\n"
    assert read_offset_checkpoint(path) == {("b-topic", 1): 42, ("a.topic-x", 0): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    path.write_text("0\n3\nt 0 1\n")
    with pytest.raises(CheckpointError, match="expected 3 entries"):
        read_offset_checkpoint(path)
    path.write_text("1\n0\n")
    with pytest.raises(CheckpointError, match="version"):
        read_offset_checkpoint(path)
    assert read_offset_checkpoint(tmp_path / "missing") == {}


@given(
    st.dictionaries(
        st.tuples(st.from_regex(r"[a-z._-]{1,20}", fullmatch=True), st.integers(0, 999)),
        st.integers(0, 2**62),
        max_size=20,
    )
)
def test_offset_checkpoint_round_trip(
    tmp_path_factory: pytest.TempPathFactory, offsets: dict[tuple[str, int], int]
) -> None:
    path = tmp_path_factory.mktemp("cp") / "cp"
    write_offset_checkpoint(path, offsets)
    assert read_offset_checkpoint(path) == offsets


def test_epoch_checkpoint_and_partition_metadata(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_epoch_checkpoint(path, [(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (3, 120)]
    meta = tmp_path / "partition.metadata"
    write_partition_metadata(meta, TOPIC_ID)
    text = meta.read_text()
    assert text == f"version: 0\ntopic_id: {topic_id_to_str(TOPIC_ID)}"
    assert read_partition_metadata(meta) == TOPIC_ID


def test_topic_id_string_matches_kafka() -> None:
    # Kafka's Uuid.toString: URL-safe base64, no padding (22 chars).
    u = uuid.UUID(bytes=bytes(range(16)))
    assert topic_id_to_str(u) == "AAECAwQFBgcICQoLDA0ODw"
    assert topic_id_from_str("AAECAwQFBgcICQoLDA0ODw") == u
    assert topic_id_to_str(uuid.UUID(bytes=b"\xff" * 16)) == "_____________________w"


def test_log_config_parsing() -> None:
    cfg = LogConfig.from_properties(
        {"segment.bytes": "1048576", "cleanup.policy": "compact,delete", "retention.ms": "-1"}
    )
    assert cfg.segment_bytes == 1048576 and cfg.compact and cfg.delete_enabled
    assert cfg.retention_ms == -1
    assert LogConfig().max_message_bytes == 1048588
    assert LogConfig().segment_bytes == 1 << 30
    for bad, key in [
        ({"segment.bytes": "x"}, "segment.bytes"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"message.timestamp.type": "Now"}, "message.timestamp.type"),
        ({"cleanup.policy": "keep"}, "cleanup.policy"),
        ({"no.such.key": "1"}, "no.such.key"),
        ({"segment.bytes": str(2**31)}, "segment.bytes"),
    ]:
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            LogConfig.from_properties(bad)
    props = cfg.to_properties()
    assert LogConfig.from_properties(props) == cfg


def test_epoch_cache_semantics(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)  # same epoch, later offset: no change
    assert cache.assign(3, 10)
    assert cache.assign(5, 20)
    assert cache.assign(4, 15)  # lower epoch: evicts 5 (conflicting)
    assert cache.entries() == [(1, 0), (3, 10), (4, 15)]
    cache.truncate_from_end(12)
    assert cache.entries() == [(1, 0), (3, 10)]
    cache.truncate_from_start(11)
    assert cache.entries() == [(3, 11)]
    assert LeaderEpochCache(tmp_path).entries() == [(3, 11)]
    assert cache.epoch_for_offset(50) == 3 and cache.epoch_for_offset(5) is None


def test_manager_create_reload_delete(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    clock = ManualClock(T0)
    mgr = LogManager(dirs, small_config(), clock)
    ids = {p: uuid.uuid4() for p in range(4)}
    for p in range(4):
        plog = mgr.get_or_create("orders", p, ids[p])
        for i in range(30):
            plog.append_as_leader(batch(2, tag=i), 1, now_ms=T0)
        plog.high_watermark = plog.log_end_offset
    # Fewest-partitions placement spreads them 2 + 2.
    placed = [mgr.log_dir_of("orders", p) for p in range(4)]
    assert placed.count(dirs[0]) == 2 and placed.count(dirs[1]) == 2
    mgr.get("orders", 0).delete_records_before(10)  # type: ignore[union-attr]
    mgr.checkpoint()
    rp = read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")
    assert set(rp) == {("orders", p) for p in range(4) if placed[p] == dirs[0]}
    assert read_offset_checkpoint(placed[0] / "log-start-offset-checkpoint") == {("orders", 0): 10}  # type: ignore[operator]
    mgr.close()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()

    mgr2 = LogManager(dirs, small_config(), clock)
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    assert sorted(pl.partition for pl in mgr2.all_logs()) == [0, 1, 2, 3]
    p0 = mgr2.get("orders", 0)
    assert p0 is not None
    assert p0.topic_id == ids[0]
    assert p0.log_end_offset == 60 and p0.log_start_offset == 10
    assert p0.recovery_point == 60
    with pytest.raises(ValueError, match="topic id"):
        mgr2.get_or_create("orders", 0, uuid.uuid4())
    pdir = p0.dir
    assert mgr2.delete("orders", 0)
    assert not pdir.exists()
    assert not list(pdir.parent.glob("*-delete"))
    assert mgr2.get("orders", 0) is None
    mgr2.periodic(T0 + 1000)
    mgr2.close()


def test_manager_periodic_flush_and_retention(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    cfg = small_config(**{"flush.ms": "1000", "retention.ms": "5000", "file.delete.delay.ms": "0"})
    schedule = LogSchedule(retention_check_ms=1000, recovery_checkpoint_ms=1000)
    mgr = LogManager([tmp_path], cfg, clock, schedule=schedule)
    plog = mgr.get_or_create("t", 0, uuid.uuid4())
    for i in range(100):
        plog.append_as_leader(batch(2, tag=i), 0, now_ms=T0)
    plog.high_watermark = plog.log_end_offset
    assert plog.recovery_point < plog.log_end_offset
    mgr.periodic(T0 + 2000)
    assert plog.recovery_point == plog.log_end_offset
    cp = read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert cp == {("t", 0): plog.log_end_offset}
    mgr.periodic(T0 + 10_000)
    assert plog.log_start_offset == plog.log_end_offset
    mgr.close()


def test_an_empty_partition_metadata_is_relearnt_from_the_metadata_log(tmp_path: Path) -> None:
    """A power loss before a new partition's files were fsynced can leave partition.metadata
    empty: the log loads without an id and takes the one the metadata image gives it."""
    clock = ManualClock(T0)
    mgr = LogManager([tmp_path], small_config(), clock)
    plog = mgr.get_or_create("t", 0, TOPIC_ID)
    mgr.close()
    (plog.dir / "partition.metadata").write_bytes(b"")
    again = LogManager([tmp_path], small_config(), clock)
    loaded = again.get("t", 0)
    assert loaded is not None and loaded.topic_id is None
    again.get_or_create("t", 0, TOPIC_ID)
    assert loaded.topic_id == TOPIC_ID
    assert read_partition_metadata(plog.dir / "partition.metadata") == TOPIC_ID
    again.close()


def test_a_new_log_is_made_without_looking_around(tmp_path: Path) -> None:
    """A partition directory made just now gets its partition.metadata (Kafka's bytes, written
    once: no temporary file) and its first segment; no index file until one is needed."""
    clock = ManualClock(T0)
    mgr = LogManager([tmp_path], small_config(), clock)
    plog = mgr.get_or_create("t", 3, TOPIC_ID)
    assert sorted(p.name for p in plog.dir.iterdir()) == [
        "00000000000000000000.log",
        "partition.metadata",
    ]
    meta = (plog.dir / "partition.metadata").read_text()
    assert meta == f"version: 0\ntopic_id: {topic_id_to_str(TOPIC_ID)}"
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (0, 0, 0)
    plog.append_as_leader(batch(3), 1, now_ms=T0)
    mgr.close()
    again = LogManager([tmp_path], small_config(), clock)
    loaded = again.get("t", 3)
    assert loaded is not None and loaded.topic_id == TOPIC_ID and loaded.log_end_offset == 3
    again.close()


def test_a_directory_already_there_is_loaded_not_made(tmp_path: Path) -> None:
    """Open finds the directory (left by a crash before the log was registered): what is in it
    is loaded and its leftovers cleaned, as at start-up."""
    from broker.log import PartitionLog

    clock = ManualClock(T0)
    first = PartitionLog.open(tmp_path, "t", 0, TOPIC_ID, small_config(), clock)
    first.append_as_leader(batch(2), 1, now_ms=T0)
    first.close()
    (first.dir / "partition.metadata.tmp").write_text("torn")
    again = PartitionLog.open(tmp_path, "t", 0, TOPIC_ID, small_config(), clock)
    assert again.log_end_offset == 2 and again.latest_epoch == 1
    assert not (first.dir / "partition.metadata.tmp").exists()
    with pytest.raises(ValueError, match="topic id"):
        PartitionLog.open(tmp_path, "t", 0, uuid.uuid4(), small_config(), clock)
    again.close()


def test_tail_reads_start_at_their_batch_and_stay_right_after_a_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fetches at the log end start reading at the batch that holds their offset (the recent
    appends remember where each ended), and agree with a walk from the segment's start,
    also after a truncation moved the end back."""
    from broker.log import PartitionLog
    from broker.log import segment as segment_mod

    cfg = small_config(**{"segment.bytes": "1048576", "index.interval.bytes": "1048576"})
    plog = PartitionLog.open(tmp_path, "t", 0, TOPIC_ID, cfg, ManualClock(T0))
    for i in range(60):
        plog.append_as_leader(batch(2, tag=i), 1, now_ms=T0)
    seg = plog.segments[-1]
    real = segment_mod.iter_headers

    def walk(offset: int) -> object:
        return next(
            (h for h in real(seg.fd, 0, seg.size) if h.last_offset >= offset),
            None,
        )

    starts: list[int] = []

    def recording(fd: int, start: int, end: int, *rest: object) -> object:
        starts.append(start)
        return real(fd, start, end, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(segment_mod, "iter_headers", recording)
    tail = seg.translate_offset(119)
    assert tail is not None and tail == walk(119) and starts == [tail.position]
    plog.truncate_to(81)  # keeps offsets 0-79: the batch holding 81 (80-81) goes
    for i in range(5):
        plog.append_as_leader(batch(3, tag=100 + i), 2, now_ms=T0)
    for offset in range(0, plog.log_end_offset):
        assert seg.translate_offset(offset) == walk(offset), offset
    assert seg.translate_offset(plog.log_end_offset) is None
    plog.close()
