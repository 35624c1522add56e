"""The max timestamp a batch is stored and retained with comes from its records, not from the
producer's header (Kafka's LogValidator), and per-record errors name the offending records
(KIP-467)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log import LogConfig, ManualClock
from broker.log.errors import INVALID_RECORD, INVALID_TIMESTAMP, RecordValidationError
from broker.log.validation import AppendOrigin, check_leader_batches
from protocol.records import BatchView, Compression, Record, build_batch, iter_records

from .log_helpers import T0, open_log, small_config, views

DAY = 24 * 3600 * 1000
WEEK = 7 * DAY


def stamped(
    deltas: list[int],
    *,
    base: int = T0,
    header_max: int | None = None,
    keys: list[bytes | None] | None = None,
    compression: Compression = Compression.NONE,
    **kw: object,
) -> bytes:
    """A batch whose records are ``base + delta``; ``header_max`` is what the header claims."""
    recs = [
        Record(
            key=(keys[i] if keys is not None else b"k%d" % i),
            value=b"v%d" % i,
            timestamp_delta=d,
        )
        for i, d in enumerate(deltas)
    ]
    return build_batch(
        recs,
        base_timestamp=base,
        max_timestamp=header_max,
        compression=compression,
        **kw,  # type: ignore[arg-type]
    )


def stored(plog_dir: Path) -> list[BatchView]:
    data = b"".join(p.read_bytes() for p in sorted(plog_dir.glob("*.log")))
    return views([data])


# -- the validation layer --------------------------------------------------------------------


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
def test_header_max_timestamp_zero_is_replaced_by_the_records_max(
    compression: Compression,
) -> None:
    raw = stamped([0, 7, 3], header_max=0, compression=compression)
    (cb,) = check_leader_batches(raw, LogConfig(), T0, AppendOrigin.CLIENT)
    assert cb.max_timestamp == T0 + 7
    assert cb.header_stale


def test_an_honest_header_is_left_alone() -> None:
    (cb,) = check_leader_batches(stamped([0, 7, 3]), LogConfig(), T0, AppendOrigin.CLIENT)
    assert (cb.max_timestamp, cb.header_stale) == (T0 + 7, False)


def test_a_header_claiming_more_than_its_records_is_corrected_too() -> None:
    raw = stamped([0, 5, 2], header_max=T0 + 1000)
    (cb,) = check_leader_batches(raw, LogConfig(), T0, AppendOrigin.CLIENT)
    assert (cb.max_timestamp, cb.header_stale) == (T0 + 5, True)


def test_negative_deltas_and_multi_byte_varints() -> None:
    deltas = [0, -5, 300_000, -2_000_000, 64, 8191, 8192, -1]
    (cb,) = check_leader_batches(
        stamped(deltas, header_max=0), LogConfig(), T0 + 300_000, AppendOrigin.CLIENT
    )
    assert cb.max_timestamp == T0 + 300_000
    # every delta negative but the base's own: the walk still finds the max
    (cb,) = check_leader_batches(
        stamped([-3, -9, -1], base=T0, header_max=0), LogConfig(), T0, AppendOrigin.CLIENT
    )
    assert cb.max_timestamp == T0 - 1


def test_all_records_without_timestamp_store_minus_one_as_kafka() -> None:
    """librdkafka writes base -1 and MaxTimestamp 0 when every record says -1; Kafka's leader
    starts its max at NO_TIMESTAMP (-1) and only raises it for a larger record timestamp, so
    the batch is stored with -1 (and retention falls back to the segment's mtime)."""
    raw = stamped([0, 0, 0], base=-1, header_max=0)
    (cb,) = check_leader_batches(raw, LogConfig(), T0, AppendOrigin.CLIENT)
    assert (cb.max_timestamp, cb.header_stale) == (-1, True)


def test_coordinator_batches_are_trusted() -> None:
    raw = stamped([0, 7], header_max=0)
    (cb,) = check_leader_batches(raw, LogConfig(), T0, AppendOrigin.COORDINATOR)
    assert (cb.max_timestamp, cb.header_stale) == (0, False)


def test_a_record_past_after_max_is_found_whatever_the_header_says() -> None:
    hour = 3600 * 1000
    raw = stamped([0, 1, 2 * hour, 3, 3 * hour], header_max=T0 + 3)
    with pytest.raises(RecordValidationError) as e:
        check_leader_batches(raw, LogConfig(), T0, AppendOrigin.CLIENT)
    assert e.value.error_code == INVALID_TIMESTAMP
    assert [i for i, _ in e.value.record_errors] == [2, 4]
    assert "out of range" in e.value.record_errors[0][1]


def test_before_max_names_old_records_but_not_those_without_timestamp() -> None:
    cfg = small_config(**{"message.timestamp.before.max.ms": "1000"})
    # base -1: record 0 has no timestamp (never an offender), record 2 is a day old
    raw = stamped([0, T0 + 1, T0 + 1 - DAY], base=-1, header_max=T0)
    with pytest.raises(RecordValidationError) as e:
        check_leader_batches(raw, cfg, T0, AppendOrigin.CLIENT)
    assert e.value.error_code == INVALID_TIMESTAMP
    assert [i for i, _ in e.value.record_errors] == [2]
    (cb,) = check_leader_batches(stamped([0, T0 + 1], base=-1), cfg, T0, AppendOrigin.CLIENT)
    assert cb.max_timestamp == T0


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
def test_keyless_records_in_a_compacted_topic_are_each_named(compression: Compression) -> None:
    cfg = small_config(**{"cleanup.policy": "compact"})
    keys: list[bytes | None] = [None if i % 10 == 0 else b"k%d" % i for i in range(100)]
    raw = stamped(list(range(100)), keys=keys, compression=compression)
    with pytest.raises(RecordValidationError) as e:
        check_leader_batches(raw, cfg, T0, AppendOrigin.CLIENT)
    assert e.value.error_code == INVALID_RECORD
    assert [i for i, _ in e.value.record_errors] == list(range(0, 100, 10))
    assert all("key" in m for _, m in e.value.record_errors)
    assert "10 record(s)" in e.value.message


def test_a_keyless_record_with_a_bad_timestamp_makes_the_batch_invalid_timestamp() -> None:
    cfg = small_config(**{"cleanup.policy": "compact"})
    raw = stamped([0, 0, 5 * 3600 * 1000], keys=[None, b"a", b"b"])
    with pytest.raises(RecordValidationError) as e:
        check_leader_batches(raw, cfg, T0, AppendOrigin.CLIENT)
    assert e.value.error_code == INVALID_TIMESTAMP  # one bad timestamp decides, as in Kafka
    assert [i for i, _ in e.value.record_errors] == [0, 2]


def test_a_producer_log_append_time_batch_names_every_record() -> None:
    raw = stamped([0, 1, 2], log_append_time=True)
    with pytest.raises(RecordValidationError) as e:
        check_leader_batches(raw, LogConfig(), T0, AppendOrigin.CLIENT)
    assert e.value.error_code == INVALID_TIMESTAMP
    assert [i for i, _ in e.value.record_errors] == [0, 1, 2]


# -- the log: what is stored, retained and rolled ------------------------------------------


def test_stored_header_carries_the_records_max_and_a_valid_crc(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    raw = stamped([0, 9, 4], header_max=0)
    plog.append_as_leader(raw, 3, now_ms=T0)
    plog.high_watermark = plog.log_end_offset
    (v,) = views(plog.read(0, 1 << 20).records)
    assert v.max_timestamp == T0 + 9
    assert v.crc_ok()
    assert [r.timestamp for r in iter_records(v)] == [T0, T0 + 9, T0 + 4]
    assert bytes(v.raw)[61:] == raw[61:]  # the records themselves are the producer's
    assert plog.active_segment.max_timestamp_so_far.timestamp == T0 + 9
    all_unset = stamped([0, 0], base=-1, header_max=0)
    plog.append_as_leader(all_unset, 3, now_ms=T0)
    assert stored(plog.dir)[-1].max_timestamp == -1
    assert stored(plog.dir)[-1].crc_ok()


def test_produced_records_survive_a_week_of_retention(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    cfg = small_config(**{"retention.ms": str(WEEK), "file.delete.delay.ms": "0"})
    plog = open_log(tmp_path, cfg, clock)
    plog.append_as_leader(stamped([0, 1, 2], header_max=0), 0, now_ms=T0)
    plog.append_as_leader(stamped([0, 0], base=-1, header_max=0), 0, now_ms=T0)
    plog.high_watermark = plog.log_end_offset
    assert plog.delete_old_segments(T0 + 1000) == 0
    assert plog.log_start_offset == 0
    assert plog.delete_old_segments(T0 + WEEK + 10_000) == 1  # ... and go once a week old


def test_mirrored_batches_keep_their_bytes_but_retention_uses_the_records(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    cfg = small_config(**{"retention.ms": str(WEEK), "file.delete.delay.ms": "0"})
    plog = open_log(tmp_path, cfg, clock)
    first = stamped([0, 5, 2], header_max=0, base_offset=0, partition_leader_epoch=1)
    second = stamped([0, 0], base=-1, header_max=0, base_offset=3, partition_leader_epoch=1)
    plog.append_raw(first + second, now_ms=T0)
    plog.high_watermark = plog.log_end_offset
    assert b"".join(bytes(v.raw) for v in stored(plog.dir)) == first + second
    seg = plog.active_segment
    assert seg.max_timestamp_so_far.timestamp == T0 + 5
    assert seg.time_waited_for_roll(T0, T0 + 10) == 5  # not "since 1970"
    assert plog.delete_old_segments(T0 + 1000) == 0
    assert plog.log_start_offset == 0


def test_recovery_and_restart_use_the_records_max_of_mirrored_batches(tmp_path: Path) -> None:
    cfg = small_config(**{"retention.ms": str(WEEK), "file.delete.delay.ms": "0"})
    plog = open_log(tmp_path, cfg)
    plog.append_raw(stamped([0, 5, 2], header_max=0, base_offset=0), now_ms=T0)
    plog.close()
    for p in tmp_path.rglob("*.timeindex"):
        os.remove(p)  # rebuilt from the segment, as after an unclean shutdown
    plog = open_log(tmp_path, cfg)
    seg = plog.active_segment
    assert seg.max_timestamp_so_far.timestamp == T0 + 5
    assert seg.time_waited_for_roll(T0, T0 + 10) == 5
    assert plog.offset_for_timestamp(T0 + 4) == (1, T0 + 5, -1)
    assert plog.max_timestamp_offset() == (1, T0 + 5, -1)
