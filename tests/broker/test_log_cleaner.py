"""The log cleaner on real partition logs: what it picks, what it leaves, the swap, its
checkpoint, crash leftovers, producer state after a reload, the mirror veto."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from broker.log import LogConfig, LogManager, ManualClock, PartitionLog, ProducerStateManager
from broker.log.cleaner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogCleaner
from broker.log.segment_swap import CLEANED_SUFFIX, SWAP_SUFFIX, rename_suffix
from protocol.records import Compression, Record, build_batch, iter_records, scan_batches
from tests.waits import wait_for_async

from .log_helpers import T0, TOPIC_ID, small_config

DAY = 24 * 3600 * 1000


def compact_config(**overrides: str) -> LogConfig:
    props = {
        "cleanup.policy": "compact",
        "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01",
        "index.interval.bytes": "128",
    }
    props.update(overrides)
    return small_config(**props)


class Env:
    def __init__(self, tmp: Path, config: LogConfig | None = None) -> None:
        self.tmp = tmp
        self.clock = ManualClock(T0)
        self.config = config or compact_config()
        self.mgr = LogManager([tmp], self.config, self.clock)
        self.plog = self.mgr.get_or_create("topic", 0, TOPIC_ID, self.config)
        self.psm = attach(self.plog)
        self.vetoed: set[tuple[str, int]] = set()
        self.cleaner = LogCleaner(
            self.mgr,
            CleanerConfig(),
            self.clock,
            may_clean=lambda t, p: (t, p) not in self.vetoed,
        )

    def put(self, *pairs: tuple[bytes, bytes | None], ts: int = T0, **kw: object) -> int:
        recs = [Record(key=k, value=v) for k, v in pairs]
        data = build_batch(recs, base_timestamp=ts, **kw)  # type: ignore[arg-type]
        result = self.plog.append_as_leader(data, 0, now_ms=ts)
        self.plog.high_watermark = self.plog.log_end_offset
        return result.first_offset

    def updates(self, n: int, keys: int = 3, ts: int = T0) -> dict[bytes, tuple[int, bytes]]:
        latest = {}
        for i in range(n):
            key = f"key-{i % keys}".encode()
            value = f"value-{i:04d}-".encode() * 4
            latest[key] = (self.put((key, value), ts=ts), value)
        return latest

    def clean(self) -> int:
        return asyncio.run(self.cleaner.clean_all())


def attach(plog: PartitionLog) -> ProducerStateManager:
    psm = ProducerStateManager(plog.dir, ManualClock(T0))
    plog.load_producer_state(psm)
    return psm


def contents(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        result = plog.read(offset, 1 << 20, upper_bound=end)
        if not result.records:
            break
        for buf in result.records:
            for batch in scan_batches(buf, allow_partial_tail=True):
                if not batch.is_control:
                    out.extend((r.offset, r.key, r.value) for r in iter_records(batch))
                offset = batch.last_offset + 1
    return out


def files(plog: PartitionLog) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(plog.dir.glob("*.log"))}


def test_latest_value_per_key_survives_at_the_same_offsets(tmp_path: Path) -> None:
    env = Env(tmp_path)
    latest = env.updates(60)
    plog = env.plog
    before = contents(plog)
    plog.roll()
    tail = env.put((b"key-0", b"in-the-active-segment"))
    active = plog.active_segment
    active_bytes = active.log_path.read_bytes()
    size_before = plog.size_bytes
    assert len(plog.segments) > 4

    assert env.clean() == 1

    after = contents(plog)
    by_offset = dict((o, (k, v)) for o, k, v in before)
    # Survivors keep their offsets and values; older values of a key are gone.
    for offset, key, value in after[:-1]:
        assert by_offset[offset] == (key, value)
    assert {k: (o, v) for o, k, v in after[:-1]} == latest
    assert [o for o, _, _ in after[:-1]] == sorted(o for o, _ in latest.values())
    assert after[-1] == (tail, b"key-0", b"in-the-active-segment")
    assert plog.size_bytes < size_before / 4
    # The active segment is the same object and the same bytes.
    assert plog.active_segment is active and active.log_path.read_bytes() == active_bytes
    # Reads from a removed offset land on the next survivor (a gap).
    first_gap = next(
        o for o in range(plog.log_end_offset) if o not in dict.fromkeys(x for x, _, _ in after)
    )
    got = plog.read(first_gap, 1 << 20).records
    first = next(scan_batches(got[0], allow_partial_tail=True))
    assert first.base_offset > first_gap
    # Checkpoint: Kafka's format, the end of the cleaned range.
    lines = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text().splitlines()
    assert lines == ["0", "1", f"topic 0 {active.base_offset}"]
    # Nothing left to do: the next pass cleans nothing.
    assert env.clean() == 0


def test_cleaned_log_reopens_and_reads_the_same(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.updates(40)
    env.plog.roll()
    env.clean()
    after = contents(env.plog)
    env.mgr.close()
    mgr = LogManager([tmp_path], env.config, env.clock)
    plog = mgr.get("topic", 0)
    assert plog is not None
    assert contents(plog) == after
    # Every surviving offset is found through the rebuilt indexes.
    for offset, key, _ in after:
        (buf,) = plog.read(offset, 1, upper_bound=plog.log_end_offset).records
        batch = next(scan_batches(buf))
        assert any(r.offset == offset and r.key == key for r in iter_records(batch))
    mgr.close()


def test_small_cleaned_segments_are_grouped(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.updates(60)
    env.plog.roll()
    n_before = len(env.plog.segments)
    env.clean()
    n_after_first = len(env.plog.segments)
    env.updates(30)  # more dirt, so a second pass runs and merges the now small segments
    env.plog.roll()
    env.clean()
    assert n_after_first <= n_before
    assert len(env.plog.segments) < n_before


def test_tombstones_kept_before_the_horizon_and_removed_after(tmp_path: Path) -> None:
    env = Env(tmp_path, compact_config(**{"delete.retention.ms": str(DAY)}))
    env.put((b"gone", b"v1"))
    env.put((b"gone", None))
    env.updates(20)
    env.plog.roll()
    env.clean()
    assert (b"gone", None) in [(k, v) for _, k, v in contents(env.plog)]
    assert (b"gone", b"v1") not in [(k, v) for _, k, v in contents(env.plog)]

    env.clock.advance(2 * DAY)
    env.updates(20, ts=T0 + 2 * DAY)  # new dirt for a second pass
    env.plog.roll()
    assert env.clean() == 1
    assert b"gone" not in [k for _, k, _ in contents(env.plog)]


def test_aborted_records_removed_committed_kept(tmp_path: Path) -> None:
    env = Env(tmp_path)
    plog = env.plog
    env.put((b"a", b"plain"))
    txn = {"producer_epoch": 0, "base_sequence": 0, "is_transactional": True}
    env.put((b"a", b"aborted"), producer_id=7, **txn)
    plog.append_txn_marker(7, 0, 0, False, leader_epoch=0, now_ms=T0)
    env.put((b"b", b"committed"), producer_id=8, **txn)
    plog.append_txn_marker(8, 0, 0, True, leader_epoch=0, now_ms=T0)
    plog.high_watermark = plog.log_end_offset
    env.updates(20, keys=5)  # fill segments (keys key-0..4 do not touch a/b)
    plog.roll()
    assert plog.aborted_transactions(0, plog.log_end_offset)
    env.clean()
    kv = [(k, v) for _, k, v in contents(plog) if k in (b"a", b"b")]
    assert kv == [(b"a", b"plain"), (b"b", b"committed")]
    # Markers stay, and the .txnindex entry too (READ_COMMITTED fetches still get it).
    assert plog.aborted_transactions(0, plog.log_end_offset)[0].producer_id == 7
    markers = [
        b.base_offset
        for s in plog.segments
        for b in scan_batches(s.log_path.read_bytes())
        if b.is_control
    ]
    assert markers == [2, 4]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_compressed_batches_recompressed_with_their_codec(
    tmp_path: Path, codec: Compression
) -> None:
    env = Env(tmp_path)
    pairs = [(f"k{i % 2}".encode(), f"v{i}".encode() * 10) for i in range(6)]
    env.put(*pairs, compression=codec)
    keep = env.put((b"solo", b"x" * 50), compression=codec)
    env.updates(30)
    env.plog.roll()
    segment0 = env.plog.segments[0].log_path.read_bytes()
    untouched_before = next(b for b in scan_batches(segment0) if b.base_offset == keep).raw
    env.clean()
    batches = [b for s in env.plog.segments for b in scan_batches(s.log_path.read_bytes())]
    rebuilt = next(b for b in batches if b.base_offset == 0)
    assert rebuilt.compression == codec and rebuilt.last_offset == 5
    assert [(r.offset, r.key) for r in iter_records(rebuilt)] == [(4, b"k0"), (5, b"k1")]
    untouched = next(b for b in batches if b.base_offset == keep)
    assert bytes(untouched.raw) == bytes(untouched_before)


def test_idempotent_producer_dedupes_a_retry_after_cleaning_and_reload(tmp_path: Path) -> None:
    env = Env(tmp_path)
    idem = {"producer_id": 5, "producer_epoch": 0, "base_sequence": 0}
    retry = build_batch([Record(key=b"a", value=b"1")], base_timestamp=T0, **idem)  # type: ignore[arg-type]
    first = env.plog.append_as_leader(retry, 0, now_ms=T0)
    env.plog.high_watermark = env.plog.log_end_offset
    env.put((b"a", b"2"))  # supersedes the idempotent producer's only record
    env.updates(30)
    env.plog.roll()
    env.clean()
    assert (b"a", b"1") not in [(k, v) for _, k, v in contents(env.plog)]
    env.mgr.close()
    for snap in tmp_path.glob("topic-0/*.snapshot"):
        snap.unlink()  # force a rebuild of the producer state from the cleaned log
    mgr = LogManager([tmp_path], env.config, env.clock)
    plog = mgr.get("topic", 0)
    assert plog is not None
    attach(plog)
    again = plog.append_as_leader(retry, 0, now_ms=T0)
    assert again.duplicate and again.first_offset == first.first_offset
    mgr.close()


@pytest.mark.parametrize("stage", ["swap", "swap+deleted", "cleaned"])
def test_crash_leftovers_are_handled_on_open(
    tmp_path: Path, stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = Env(tmp_path)
    latest = env.updates(40)
    env.plog.roll()
    before = contents(env.plog)

    def crash(self: PartitionLog, old: list, sizes: list) -> bool:  # type: ignore[type-arg]
        base = old[0].base_offset
        if stage != "cleaned":
            rename_suffix(self.dir, base, CLEANED_SUFFIX, SWAP_SUFFIX)
        if stage == "swap+deleted":
            for seg in old:
                seg.mark_deleted()
        raise SystemExit  # the process dies here

    monkeypatch.setattr(PartitionLog, "replace_segments", crash)
    with pytest.raises(SystemExit):
        env.clean()
    leftovers = [p.name for p in env.plog.dir.iterdir() if p.suffix in (".swap", ".cleaned")]
    assert leftovers
    env.plog.close_handles()
    monkeypatch.undo()

    plog = PartitionLog.open(tmp_path, "topic", 0, TOPIC_ID, env.config, env.clock)
    attach(plog)
    assert not [p for p in plog.dir.iterdir() if p.suffix in (".swap", ".cleaned", ".deleted")]
    after = contents(plog)
    by_offset = {o: (k, v) for o, k, v in before}
    assert all(by_offset[o] == (k, v) for o, k, v in after)
    for key, (offset, value) in latest.items():
        assert (offset, key, value) in after
    if stage == "cleaned":
        assert after == before  # the clean never committed
    else:
        assert len(after) < len(before)  # the first group's swap was completed
    # The swapped-in segment replaced the first one: nothing below it was lost.
    assert plog.segments[0].base_offset == 0 and plog.log_start_offset == 0


def test_dirty_ratio_threshold(tmp_path: Path) -> None:
    env = Env(tmp_path, compact_config(**{"min.cleanable.dirty.ratio": "0.9"}))
    env.updates(40)
    env.plog.roll()
    assert env.clean() == 1  # all dirty: ratio 1.0
    env.updates(3)
    env.plog.roll()
    found = env.cleaner.cleanable(env.plog, env.clock.now_ms())
    assert found is not None and 0 < found.dirty_ratio < 0.9
    snapshot = files(env.plog)
    assert env.clean() == 0
    assert files(env.plog) == snapshot
    env.plog.update_config(compact_config(**{"min.cleanable.dirty.ratio": "0.1"}))
    assert env.clean() == 1


def test_min_compaction_lag_and_open_transactions_bound_the_range(tmp_path: Path) -> None:
    env = Env(tmp_path, compact_config(**{"min.compaction.lag.ms": str(3600_000)}))
    env.updates(40)
    env.plog.roll()
    assert env.cleaner.cleanable(env.plog, T0 + 60_000) is None  # all too young
    assert env.cleaner.cleanable(env.plog, T0 + 2 * 3600_000) is not None

    env2 = Env(tmp_path / "txn")
    env2.updates(20)
    open_at = env2.put(
        (b"t", b"open"), producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    env2.updates(20)
    env2.plog.roll()
    found = env2.cleaner.cleanable(env2.plog, T0)
    assert found is not None and found.end <= open_at
    holding = [s for s in env2.plog.segments if s.base_offset <= open_at][-1]
    held = holding.log_path.read_bytes()
    env2.clean()
    assert holding in env2.plog.segments and holding.log_path.read_bytes() == held


def test_vetoed_partition_is_not_cleaned(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.updates(40)
    env.plog.roll()
    env.vetoed.add(("topic", 0))
    snapshot = files(env.plog)
    assert env.clean() == 0
    assert files(env.plog) == snapshot
    env.vetoed.clear()
    assert env.clean() == 1


def test_logs_without_producer_state_are_left_alone(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.updates(40)
    env.plog.roll()
    env.plog.producer_state = None  # not hosted: the LSO is unknown
    snapshot = files(env.plog)
    assert env.clean() == 0
    assert files(env.plog) == snapshot


def test_delete_policy_topics_are_ignored(tmp_path: Path) -> None:
    env = Env(tmp_path, compact_config(**{"cleanup.policy": "delete"}))
    env.updates(40)
    env.plog.roll()
    snapshot = files(env.plog)
    assert env.clean() == 0
    assert files(env.plog) == snapshot


def test_a_log_changed_during_cleaning_is_not_swapped(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.updates(40)
    env.plog.roll()
    found = env.cleaner.cleanable(env.plog, T0)
    assert found is not None

    async def run() -> bool:
        task = asyncio.create_task(env.cleaner.clean(found))
        await asyncio.sleep(0)
        env.plog.truncate_to(5)  # a follower truncation while the worker reads
        return await task

    assert asyncio.run(run()) is False
    assert [o for o, _, _ in contents(env.plog)] == [0, 1, 2, 3, 4]
    assert not list(env.plog.dir.glob("*" + CLEANED_SUFFIX))


def test_tick_starts_workers_that_back_off_when_idle(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.updates(40)
    env.plog.roll()

    async def run(cleaner: LogCleaner) -> None:
        cleaner.tick(env.clock.now_ms())
        cleaner.tick(env.clock.now_ms())  # once started, ticks change nothing
        for _ in range(500):
            await asyncio.sleep(0.01)
            if cleaner.bytes_read:
                break
        await asyncio.sleep(0.3)
        await cleaner.close()

    off = LogCleaner(env.mgr, CleanerConfig(enable=False), env.clock)
    asyncio.run(run(off))
    assert off.passes == 0
    on = LogCleaner(env.mgr, CleanerConfig(backoff_ms=60_000), env.clock)
    asyncio.run(run(on))
    # One pick that cleaned, one that found nothing; then the backoff.
    assert on.passes == 2 and 0 < on.bytes_written < on.bytes_read
    assert os.path.exists(tmp_path / CLEANER_OFFSET_CHECKPOINT)


def fill_partition(plog: PartitionLog, n: int, keys: int = 3, ts: int = T0) -> None:
    for i in range(n):
        rec = Record(key=f"key-{i % keys}".encode(), value=f"value-{i:04d}-".encode() * 4)
        plog.append_as_leader(build_batch([rec], base_timestamp=ts), 0, now_ms=ts)
    plog.high_watermark = plog.log_end_offset


def test_corrupt_batch_marks_only_its_partition_uncleanable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = Env(tmp_path)
    other = env.mgr.get_or_create("topic", 1, TOPIC_ID, env.config)
    attach(other)
    for plog in (env.plog, other):
        fill_partition(plog, 40)
        plog.roll()
    # Flip a byte inside the first batch's records: its CRC no longer matches.
    seg = env.plog.segments[1]
    with open(seg.log_path, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    broken = files(env.plog)
    closed = {name: broken[name] for name in list(broken)[:-1]}  # all but the active one
    other_before = other.size_bytes

    caplog.set_level("ERROR", logger="broker.log.cleaner")
    assert env.clean() == 1  # the other partition is cleaned all the same
    assert other.size_bytes < other_before
    assert files(env.plog) == broken
    assert env.cleaner.uncleanable == {("topic", 0)}
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "uncleanable" in errors[0].getMessage()
    snap = env.cleaner.metrics_snapshot()
    assert snap.uncleanable_partitions_count == {str(tmp_path): 1}
    assert snap.uncleanable_bytes[str(tmp_path)] > 0

    # Later passes leave it alone (no new error line) and go on with the others.
    for plog in (env.plog, other):
        fill_partition(plog, 20)
        plog.roll()
    assert env.clean() == 1
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
    now = files(env.plog)
    assert now != broken and all(now[name] == data for name, data in closed.items())


def test_cleaner_metrics_follow_kafka_definitions(tmp_path: Path) -> None:
    config = compact_config(**{"max.compaction.lag.ms": "60000"})
    env = Env(tmp_path, config)
    env.cleaner = LogCleaner(env.mgr, CleanerConfig(dedupe_buffer_size=24 * 1000), env.clock)
    snap = env.cleaner.metrics_snapshot()
    assert (snap.max_dirty_percent, snap.cleaner_recopy_percent, snap.dead_thread_count) == (
        0,
        0,
        0,
    )
    assert snap.uncleanable_partitions_count == {str(tmp_path): 0}
    env.updates(40, keys=5)
    env.plog.roll()
    env.clock.advance(100_000)  # dirty data 100 s old, 40 s past max.compaction.lag.ms
    found = env.cleaner.grab(env.clock.now_ms(), env.cleaner._workers[0])
    assert found is not None and found.overdue
    env.cleaner._in_progress.clear()
    snap = env.cleaner.metrics_snapshot()
    assert snap.max_dirty_percent == 100  # never cleaned: all dirty
    assert snap.max_compaction_delay_secs == 40
    assert snap.time_since_last_run_ms == 0
    env.clock.advance(1234)
    assert env.cleaner.metrics_snapshot().time_since_last_run_ms == 1234

    assert env.clean() == 1
    snap = env.cleaner.metrics_snapshot()
    c = env.cleaner
    assert snap.cleaner_recopy_percent == int(100 * c.bytes_written / c.bytes_read)
    assert 0 < snap.cleaner_recopy_percent < 50
    # 5 keys in a map of 1000 slots
    assert snap.max_buffer_utilization_percent == 0
    assert c._workers[0].last.buffer_utilization == 5 / 1000
    assert snap.max_clean_time_secs == 0  # seconds, truncated as Kafka's gauge
    assert snap.max_dirty_percent == 0  # the last pick found nothing dirty


def test_a_full_offset_map_cleans_in_steps(tmp_path: Path) -> None:
    env = Env(tmp_path, compact_config(**{"delete.retention.ms": "0"}))
    # 12 slots * 0.9: at most 10 keys mapped per clean
    env.cleaner = LogCleaner(env.mgr, CleanerConfig(dedupe_buffer_size=24 * 12), env.clock)
    latest = env.updates(90, keys=30)
    # A delete past the first clean's end: it must not go before the values it deletes.
    latest[b"key-29"] = (env.put((b"key-29", None)), None)  # type: ignore[assignment]
    env.plog.roll()
    env.clock.advance(1)
    active = env.plog.active_segment.base_offset
    assert env.clean() == 1
    first_end = env.cleaner._checkpoints[("topic", 0)]
    assert 0 < first_end < active
    assert env.cleaner._workers[0].last.buffer_utilization >= 0.9
    for _ in range(20):
        if env.clean() == 0:
            break
    assert env.cleaner._checkpoints[("topic", 0)] == active
    after = contents(env.plog)
    assert {k: (o, v) for o, k, v in after} == latest
    assert len(after) == 30  # the delete stays, stamped, until a clean after its horizon


def test_cleaner_keys_parse_into_the_server_config() -> None:
    from broker.config.properties import parse_properties
    from broker.config.server_config import ConfigError, parse_server_config

    base = (
        "node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=1@h:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n"
        "log.dirs=/tmp/x\n"
    )
    c, warnings = parse_server_config(parse_properties(base, "t"))
    assert (c.log_cleaner_threads, c.log_cleaner_dedupe_buffer_size) == (1, 128 * 1024 * 1024)
    assert c.log_cleaner_io_max_bytes_per_second == 1.7976931348623157e308
    assert c.log_cleaner_io_buffer_load_factor == 0.9
    extra = (
        "log.cleaner.threads=3\nlog.cleaner.io.max.bytes.per.second=1048576\n"
        "log.cleaner.dedupe.buffer.size=4194304\nlog.cleaner.io.buffer.load.factor=0.5\n"
    )
    c, warnings = parse_server_config(parse_properties(base + extra, "t"))
    assert warnings == []
    assert (c.log_cleaner_threads, c.log_cleaner_io_max_bytes_per_second) == (3, 1048576.0)
    assert (c.log_cleaner_dedupe_buffer_size, c.log_cleaner_io_buffer_load_factor) == (
        4194304,
        0.5,
    )
    # Kafka's slots per worker: buffer / threads / 24 bytes
    assert CleanerConfig(threads=3, dedupe_buffer_size=4194304).map_slots == 4194304 // 3 // 24
    with pytest.raises(ConfigError):
        parse_server_config(parse_properties(base + "log.cleaner.threads=-1\n", "t"))


def markers_in(plog: PartitionLog) -> list[tuple[int, bool]]:
    return [
        (b.base_offset, b.has_delete_horizon)
        for s in plog.segments
        for b in scan_batches(s.log_path.read_bytes())
        if b.is_control
    ]


def test_transaction_markers_removed_in_two_passes_and_the_log_reloads(tmp_path: Path) -> None:
    env = Env(tmp_path)
    plog = env.plog

    def txn(pid: int, seq: int, key: bytes, value: bytes, commit: bool) -> None:
        env.put(
            (key, value),
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )
        plog.append_txn_marker(pid, 0, 0, commit, leader_epoch=0, now_ms=env.clock.now_ms())
        plog.high_watermark = plog.log_end_offset

    env.put((b"a", b"plain"))  # 0
    txn(7, 0, b"a", b"aborted", False)  # 1, ABORT at 2
    txn(8, 0, b"b", b"committed", True)  # 3, COMMIT at 4
    txn(7, 1, b"x", b"7-2", True)  # 5, COMMIT at 6: 7's last batch
    txn(8, 1, b"y", b"8-2", True)  # 7, COMMIT at 8: 8's last batch
    env.put((b"b", b"later"))  # 9: the committed b is superseded
    env.updates(20, keys=5)
    plog.roll()

    def dirt_and_clean(advance: int) -> None:
        env.clock.advance(advance)
        env.updates(20, keys=5, ts=env.clock.now_ms())
        plog.roll()
        assert env.clean() == 1

    env.clean()
    # Pass 1 removed the data of both transactions; their markers stay (data was seen).
    assert markers_in(plog) == [(2, False), (4, False), (6, False), (8, False)]
    assert [t.producer_id for t in plog.aborted_transactions(0, plog.log_end_offset)] == [7]
    # Pass 2 finds them alone: stamped with now + delete.retention.ms, the .txnindex entry gone.
    dirt_and_clean(10)
    assert markers_in(plog) == [(2, True), (4, True), (6, False), (8, False)]
    assert plog.aborted_transactions(0, plog.log_end_offset) == []
    # Before the horizon they stay; after it they go. The last transactions' markers stay.
    dirt_and_clean(DAY - 100)
    assert markers_in(plog) == [(2, True), (4, True), (6, False), (8, False)]
    dirt_and_clean(200)
    assert markers_in(plog) == [(6, False), (8, False)]
    kv = {(k, v) for _, k, v in contents(plog)}
    assert {(b"a", b"plain"), (b"x", b"7-2"), (b"y", b"8-2"), (b"b", b"later")} <= kv

    # A reload rebuilding the producer state from the log sees no open transaction.
    env.mgr.close()
    for snap in tmp_path.glob("topic-0/*.snapshot"):
        snap.unlink()
    mgr = LogManager([tmp_path], env.config, env.clock)
    again = mgr.get("topic", 0)
    assert again is not None
    psm = attach(again)
    again.high_watermark = again.log_end_offset
    assert again.last_stable_offset == again.log_end_offset
    assert {7, 8} <= set(psm.active_producers)
    mgr.close()


def dirty_partitions(env: Env, n: int, records: int) -> list[PartitionLog]:
    out = [env.plog]
    for p in range(1, n):
        plog = env.mgr.get_or_create("topic", p, TOPIC_ID, env.config)
        attach(plog)
        out.append(plog)
    for plog in out:
        fill_partition(plog, records, keys=7)
        plog.roll()
    return out


def clean_with(tmp: Path, cfg: CleanerConfig) -> tuple[float, int]:
    """Two dirty partitions cleaned by ``cfg``'s workers: (seconds, bytes read + written)."""
    env = Env(tmp, compact_config(**{"segment.bytes": "16384"}))
    env.cleaner = cleaner = LogCleaner(env.mgr, cfg, env.clock)
    plogs = dirty_partitions(env, 2, 4000)

    async def run() -> float:
        cleaner.tick(env.clock.now_ms())
        started = time.monotonic()
        await wait_for_async(
            lambda: all(cleaner._checkpoints.get(("topic", p.partition)) for p in plogs),
            15,
            "every partition cleaned",
            step=0.005,
        )
        elapsed = time.monotonic() - started
        await cleaner.close()
        return elapsed

    elapsed = asyncio.run(run())
    assert all(p.size_bytes < 40_000 for p in plogs)
    return elapsed, cleaner.bytes_read * 2 + cleaner.bytes_written  # map + filter + write


@pytest.mark.serial
def test_io_throttle_bounds_the_bytes_per_second_of_all_workers(tmp_path: Path) -> None:
    rate = 1_000_000.0
    free, _ = clean_with(tmp_path / "free", CleanerConfig(threads=2))
    elapsed, moved = clean_with(
        tmp_path / "throttled", CleanerConfig(threads=2, io_max_bytes_per_second=rate)
    )
    # Both workers together: no faster than the rate (but for one 300 ms period's credit).
    assert moved > 5 * rate * 0.3
    assert elapsed >= (moved - rate * 0.3) / rate * 0.95
    # the throttle, not the work, takes the time (the free run is slow too on a loaded machine:
    # 1.3 s against 2.5 s throttled was seen in a full-suite run beside other jobs)
    assert free < elapsed * 0.8


@pytest.mark.serial
def test_workers_clean_different_partitions_at_once_off_the_loop(tmp_path: Path) -> None:
    env = Env(tmp_path, compact_config(**{"segment.bytes": "65536"}))
    env.cleaner = LogCleaner(env.mgr, CleanerConfig(threads=3), env.clock)
    plogs = dirty_partitions(env, 3, 6000)
    held: list[set[tuple[str, int]]] = []

    async def run() -> tuple[float, float, float]:
        cleaner = env.cleaner
        cpu, wall = time.process_time(), time.monotonic()
        cleaner.tick(env.clock.now_ms())
        worst = 0.0
        for _ in range(20_000):
            before = time.monotonic()
            await asyncio.sleep(0.001)
            worst = max(worst, time.monotonic() - before)
            held.append(set(cleaner._in_progress))
            if all(cleaner._checkpoints.get(("topic", p.partition)) for p in plogs):
                break
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        await cleaner.close()
        return worst, cpu, wall

    worst, cpu, wall = asyncio.run(run())
    assert all(p.size_bytes < 40_000 for p in plogs)
    assert max(len(h) for h in held) == 3  # three partitions held at the same moment
    # The records are parsed in the worker processes: this process (the node's loop) only
    # picks and swaps, so it stays responsive.
    assert cpu < 0.3 * wall, f"{cpu:.2f}s of CPU here in {wall:.2f}s"
    assert worst < 0.25, f"the event loop stalled {worst:.3f}s"


def test_a_failing_swap_marks_its_partition_and_a_failing_pick_kills_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = Env(tmp_path)
    env.cleaner = LogCleaner(env.mgr, CleanerConfig(threads=1, backoff_ms=50), env.clock)
    plogs = dirty_partitions(env, 2, 40)
    real = PartitionLog.replace_segments

    def broken(self: PartitionLog, old: list, sizes: list) -> bool:  # type: ignore[type-arg]
        if self.partition == 0:
            raise RuntimeError("a bug")
        return real(self, old, sizes)

    monkeypatch.setattr(PartitionLog, "replace_segments", broken)

    async def run(cleaner: LogCleaner) -> None:
        cleaner.tick(env.clock.now_ms())
        await wait_for_async(
            lambda: bool(cleaner.uncleanable) and ("topic", 1) in cleaner._checkpoints,
            10,
            "the corrupt partition marked and the other cleaned",
        )
        # Then the pick itself fails: the worker dies (Kafka's DeadThreadCount).
        monkeypatch.setattr(cleaner, "grab", lambda *a, **k: 1 / 0)
        await wait_for_async(
            lambda: cleaner.metrics_snapshot().dead_thread_count > 0, 5, "a dead cleaner worker"
        )
        await cleaner.close()

    asyncio.run(run(env.cleaner))
    assert env.cleaner.uncleanable == {("topic", 0)}
    assert plogs[1].size_bytes < plogs[0].size_bytes
    assert env.cleaner.metrics_snapshot().dead_thread_count == 1
    assert not list(plogs[0].dir.glob("*" + CLEANED_SUFFIX))  # staged files not left behind
