"""File descriptors of the log: the bounded cache of sealed segments' files, segments reopened
on demand, index entries written with short-lived descriptors, and the partition budget."""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.config.properties import parse_properties
from broker.config.server_config import ConfigError, parse_server_config
from broker.controller.fd_budget import BudgetCheck, ReplicaBudget
from broker.log import LogConfig, LogManager, ManualClock, file_cache
from broker.log.file_cache import OpenFileCache, is_fd_exhaustion
from broker.log.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX
from broker.metadata.image import MetadataImage, PartitionImage, TopicImage, apply_records
from broker.replication.replica_manager import ReplicaManager
from protocol.metadata_records import latest_type
from protocol.records import scan_batches
from tests.broker.log_helpers import T0, batch, fill, open_log, small_config


def _files(n: int, tmp_path: Path) -> list[Path]:
    paths = []
    for i in range(n):
        p = tmp_path / f"f{i}"
        p.write_bytes(f"file {i}".encode())
        paths.append(p)
    return paths


def _open_under(directory: Path) -> list[str]:
    """Names of the files under ``directory`` this process holds open."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            out.append(os.path.basename(target))
    return out


@pytest.fixture
def small_default_cache() -> Iterator[OpenFileCache]:
    cache = file_cache.default_cache()
    before = cache.max_open
    cache.resize(2)
    yield cache
    cache.resize(before)


# -- the cache -------------------------------------------------------------------------------
def test_cache_is_bounded_and_evicts_the_least_recently_used(tmp_path: Path) -> None:
    cache = OpenFileCache(2)
    a, b, c = _files(3, tmp_path)
    for key, path in (("a", a), ("b", b)):
        cache.acquire(key, path)
        cache.release(key)
    fd_a = cache.acquire("a", a)  # a is now the most recent: b goes first
    assert os.pread(fd_a, 6, 0) == b"file 0"
    cache.release("a")
    cache.acquire("c", c)
    cache.release("c")
    assert len(cache) == 2 and set(cache._entries) == {"a", "c"}
    assert cache.opens == 3 and cache.evictions == 1
    assert sorted(_open_under(tmp_path)) == ["f0", "f2"]
    cache.close_all()
    assert _open_under(tmp_path) == []


def test_a_pinned_descriptor_is_never_closed_under_its_user(tmp_path: Path) -> None:
    cache = OpenFileCache(1)
    a, b, c = _files(3, tmp_path)
    fd_a = cache.acquire("a", a)
    cache.acquire("b", b)  # over the bound while both are pinned
    assert len(cache) == 2
    cache.release("b")
    assert os.pread(fd_a, 6, 0) == b"file 0"
    cache.acquire("c", c)  # evicts the idle b, never the pinned a
    cache.release("c")
    assert "a" in cache._entries and "b" not in cache._entries
    cache.release("a")
    assert len(cache) == 1  # back within the bound once a is idle
    fd_c = cache.acquire("c", c)
    cache.discard("c")  # the segment went away while a read holds the descriptor
    assert os.pread(fd_c, 6, 0) == b"file 2" and cache.open_count == 1
    cache.release("c")
    assert cache.open_count == 0 and _open_under(tmp_path) == []


def test_claim_and_unclaim_move_a_descriptor_between_owner_and_cache(tmp_path: Path) -> None:
    cache = OpenFileCache(4)
    a, b, c = _files(3, tmp_path)
    fd = cache.acquire("a", a)
    own = cache.claim("a", a)  # pinned: the owner gets its own
    assert own != fd and cache.owned == 1
    cache.release("a")
    cache.unclaim("a", own, close=True)
    assert cache.claim("a", a) == fd and len(cache) == 0 and cache.owned == 1
    cache.unclaim("a", fd, close=False)  # sealed: back to the cache
    assert cache.owned == 0 and cache.acquire("a", a) == fd
    cache.release("a")
    # Past the owned limit an append is refused before the process runs out for real.
    cache.owned_limit = 1
    fd_b = cache.claim("b", b)
    with pytest.raises(OSError) as refused:
        cache.claim("c", c)
    assert is_fd_exhaustion(refused.value) and "open-file limit" in str(refused.value)
    fd_c = cache.claim("c", c, exempt=True)  # the metadata log and internal topics
    assert cache.owned == 1  # exempt ones are not counted
    cache.unclaim("b", fd_b, close=True)
    cache.unclaim("c", fd_c, close=True, exempt=True)
    assert cache.owned == 0
    cache.close_all()
    assert _open_under(tmp_path) == []


def test_out_of_descriptors_sheds_idle_cached_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = OpenFileCache(10)
    paths = _files(5, tmp_path)
    for i, p in enumerate(paths[:4]):
        cache.acquire(i, p)
        cache.release(i)
    real_open = os.open
    calls = []

    def emfile_once(path: object, flags: int, mode: int = 0o777) -> int:
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", emfile_once)
    cache.acquire(9, paths[4])
    cache.release(9)
    assert len(calls) == 2 and len(cache) == 3  # half the idle ones closed, then opened
    monkeypatch.setattr(os, "open", real_open)
    cache.close_all()


def test_fd_exhaustion_is_recognized() -> None:
    assert is_fd_exhaustion(OSError(errno.EMFILE, "x"))
    assert is_fd_exhaustion(OSError(errno.ENFILE, "x"))
    assert not is_fd_exhaustion(OSError(errno.ENOENT, "x"))
    assert not is_fd_exhaustion(ValueError("x"))


# -- segments ----------------------------------------------------------------------------------
def test_sealed_segments_are_reopened_on_demand(
    tmp_path: Path, small_default_cache: OpenFileCache
) -> None:
    plog = open_log(tmp_path)
    fill(plog, 120)
    assert len(plog.segments) > 5
    # The active segment's log file, at most two cached ones, and never an index file.
    held = _open_under(tmp_path)
    assert len(held) <= 3 and all(name.endswith(".log") for name in held)
    # Read every batch from the start: each sealed segment is opened as it is reached.
    offset, seen = 0, 0
    while offset < plog.log_end_offset:
        result = plog.read(offset, 1)
        batches = list(_batches(result.records[0]))
        assert batches and batches[0][0] <= offset
        offset = batches[-1][1] + 1
        seen += 1
        assert len(_open_under(tmp_path)) <= 3
    assert seen == 120
    plog.close()
    assert _open_under(tmp_path) == []


def _batches(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    for view in scan_batches(data):
        yield view.base_offset, view.last_offset


def test_a_header_walk_keeps_its_segment_open_while_others_are_read(
    tmp_path: Path, small_default_cache: OpenFileCache
) -> None:
    small_default_cache.resize(1)
    plog = open_log(tmp_path)
    fill(plog, 60)
    first, second, third = plog.segments[:3]
    walk = first.headers()
    head = next(walk)
    for seg in (second, third):  # each open would evict the first segment if it were idle
        assert seg.read(0, 8)
    rest = list(walk)
    assert [h.base_offset for h in [head, *rest]] == [h.base_offset for h in first.headers()]
    plog.close()


def test_sealed_index_files_are_complete_and_active_ones_written_at_flush(
    tmp_path: Path,
) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40)
    sealed, active = plog.segments[0], plog.segments[-1]
    # Rolled: every entry is in the file, trimmed to them.
    assert (tmp_path / "topic-0" / sealed.index.path.name).read_bytes() == sealed.index.raw()
    assert sealed.time_index.path.read_bytes() == sealed.time_index.raw()
    assert active.index.entries > 0
    assert not active.index.path.exists()  # created when first needed: here, the flush
    plog.flush()
    on_disk = active.index.path.read_bytes()
    assert on_disk[: active.index.size_in_bytes] == active.index.raw()
    assert all(b == 0 for b in on_disk[active.index.size_in_bytes :])  # still preallocated
    assert not [n for n in _open_under(tmp_path) if n.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX))]
    plog.close()
    assert active.index.path.read_bytes() == active.index.raw()


def test_a_reopened_log_reads_what_was_written(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40)
    end, bases = plog.log_end_offset, [s.base_offset for s in plog.segments]
    plog.close()
    again = open_log(tmp_path, clean_shutdown=True)
    assert again.log_end_offset == end and [s.base_offset for s in again.segments] == bases
    assert again.read(0, 1 << 20).records
    again.append_as_leader(batch(2, tag=99), 0, now_ms=T0)
    again.close()


def test_many_partitions_hold_one_descriptor_each(
    tmp_path: Path, small_default_cache: OpenFileCache
) -> None:
    logs = [
        open_log(tmp_path / str(i), small_config(**{"segment.bytes": "1024"})) for i in range(30)
    ]
    for plog in logs:
        fill(plog, 12)
        assert len(plog.segments) > 2
    assert len(_open_under(tmp_path)) <= 30 + small_default_cache.max_open
    for plog in logs:
        plog.close()
    assert _open_under(tmp_path) == []


# -- the partition budget ---------------------------------------------------------------------
def test_the_budget_leaves_a_reserve_and_the_cache() -> None:
    cache = file_cache.default_cache()
    before = cache.max_open
    try:
        budget = file_cache.configure(1000, limit=20_000)
        assert budget is not None and budget[0] == 20_000 - 2000 - 1000
        assert "20000" in budget[1] and cache.max_open == 1000
        small = file_cache.configure(1000, limit=1024)  # the cache shrinks to fit
        assert small is not None and cache.max_open == (1024 - 256) // 4
        assert small[0] == 1024 - 256 - cache.max_open
    finally:
        cache.resize(before)


def _image(replicas: dict[int, tuple[int, ...]]) -> MetadataImage:
    topic = TopicImage(
        "t",
        uuid.uuid4(),
        {p: PartitionImage(p, r, r, r[0], 0, 0) for p, r in replicas.items()},
    )
    return MetadataImage(topics={"t": topic})


PartitionRecord = latest_type("PartitionRecord")
TopicRecord = latest_type("TopicRecord")


def _records(n: int, replicas: tuple[int, ...]) -> list[object]:
    tid = uuid.uuid4()
    return [
        PartitionRecord(
            partition_id=p,
            topic_id=tid,
            replicas=replicas,
            isr=replicas,
            leader=replicas[0],
            leader_epoch=0,
            partition_epoch=0,
        )
        for p in range(n)
    ]


def test_budget_check_refuses_what_would_go_over_and_counts_what_it_admits() -> None:
    img = _image({0: (1, 2), 1: (2, 1)})
    check = BudgetCheck(ReplicaBudget(5, "open-file limit 300"), img)
    assert check.admit(_records(3, (1,))) is None  # node 1: 2 + 3 = 5
    refused = check.admit(_records(1, (1, 2)))
    assert refused is not None and refused[0] == ErrorCode.policy_violation
    assert "node 1" in refused[1] and "budget of 5" in refused[1] and "300" in refused[1]
    assert check.admit(_records(3, (2,))) is None  # node 2: 2 + 3, the refused one not counted
    assert BudgetCheck(None, img).admit(_records(10_000, (1,))) is None


def test_log_max_open_files_is_validated() -> None:
    base = (
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://localhost:9093\n"
        "controller.listener.names=CONTROLLER\nlog.dirs=/tmp/x\n"
    )
    config, warnings = parse_server_config(parse_properties(base, "t.properties"))
    assert config.log_max_open_files == 1000 and warnings == []
    config, _ = parse_server_config(parse_properties(base + "log.max.open.files=64\n", "t"))
    assert config.log_max_open_files == 64
    for bad in ("0", "-1", "many"):
        with pytest.raises(ConfigError, match=r"log\.max\.open\.files"):
            parse_server_config(parse_properties(base + f"log.max.open.files={bad}\n", "t"))


def test_a_partition_whose_log_cannot_be_opened_is_retried_and_the_others_hosted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(T0)
    logs = LogManager([tmp_path], LogConfig(), clock)
    rm = ReplicaManager(1, logs, lambda _t: LogConfig(), clock)
    real = logs.get_or_create

    def emfile_for_p1(topic: str, partition: int, *args: Any, **kw: Any) -> Any:
        if partition == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return real(topic, partition, *args, **kw)

    monkeypatch.setattr(logs, "get_or_create", emfile_for_p1)
    before = file_cache.STATS.failures.get("opening the log", 0)
    tid = uuid.uuid4()
    parts = [
        PartitionRecord(
            partition_id=p,
            topic_id=tid,
            replicas=(1,),
            isr=(1,),
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        )
        for p in range(3)
    ]
    image, delta = apply_records(
        MetadataImage(), list(enumerate([TopicRecord(name="t", topic_id=tid), *parts], 1))
    )
    rm.apply_delta(image, delta)  # no exception: partitions 0 and 2 are hosted
    assert rm.get("t", 0) is not None and rm.get("t", 2) is not None and rm.get("t", 1) is None
    assert file_cache.STATS.failures["opening the log"] == before + 1
    monkeypatch.setattr(logs, "get_or_create", real)
    rm.check_isrs()  # the periodic pass tries again
    assert rm.get("t", 1) is not None
    logs.close()


def test_a_new_empty_log_creates_no_index_files_until_needed(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    names = sorted(p.name for p in (tmp_path / "topic-0").iterdir())
    assert not [n for n in names if n.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX))], names
    plog.close()  # still empty: closing creates none either
    again = open_log(tmp_path, clean_shutdown=True)
    assert not [
        p for p in (tmp_path / "topic-0").iterdir() if p.name.endswith((INDEX_SUFFIX, ".timeindex"))
    ]
    fill(again, 3)
    again.close()  # records: the close writes both indexes
    seg = again.segments[-1]
    assert seg.index.path.exists() and seg.time_index.path.exists()
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert reopened.read(0, 1 << 20).records
    reopened.close()
