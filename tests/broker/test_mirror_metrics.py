"""The mirror metrics collector (kafka_server_mirror_*), the snapshot builder and the event-loop
reader, rendered through prometheus-client's exposition and parsed back with its parser."""

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.metadata.image import MIRROR_RESOURCE, MetadataImage
from broker.metadata.mirror_states import MirrorState
from broker.metrics.mirror_metrics import (
    FetcherRow,
    MirrorCollector,
    MirrorSnapshot,
    PartitionRow,
)
from broker.metrics.on_loop import read_on_loop
from broker.mirror.fetch_state import FetcherCounters, FetchStatus, copyable_lag
from broker.mirror.manager import PartitionInfo
from broker.mirror.metrics_snapshot import KIP_SYNC_ERROR_KINDS, STATES, build_snapshot

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(read: Any) -> Samples:
    registry = CollectorRegistry()
    registry.register(MirrorCollector(read))
    text = generate_latest(registry).decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def names(samples: Samples) -> set[str]:
    return {n for n, _ in samples}


SNAP = MirrorSnapshot(
    mirrors=("a", "b"),
    states=STATES,
    partitions=(
        PartitionRow("a", "t", 0, "MIRRORING", 5),
        PartitionRow("a", "t", 1, "MIRRORING", 12, fetch_failing=True),
        PartitionRow("a", "u", 0, "PAUSED", None),
        PartitionRow("b", "v", 0, "PREPARING", None),
        PartitionRow("gone", "w", 0, "MIRRORING", 99),  # mirror deleted: not reported
    ),
    fetchers=(
        FetcherRow("a", 1, 0, True, 10, 1, 5000, 4000, 1000, 0.5),
        FetcherRow("a", 2, 0, False, 3, 0, 700, 600, 200, 0.25),
        FetcherRow("b", 1, 0, None, 1, 2, 30, 0),
        FetcherRow("gone", 1, 0, False, 9, 9, 9, 9),
    ),
    sync_errors={("a", "groups"): 3, ("a", "partitions"): 1, ("gone", "acls"): 4},
    sync_skipped={("b", "acls"): 2},
    sync_error_kinds=KIP_SYNC_ERROR_KINDS,
    last_refresh_ms={"a": 1_700_000_000_500},
    throttle_rate=1e6,
    truncation_timeouts={"b": 2, "gone": 1},
)


def test_partition_states_are_counted_per_mirror_and_zero_filled() -> None:
    s = scrape(lambda: SNAP)
    p = "kafka_server_mirror_partitions"
    assert value(s, p, mirror="a", state="MIRRORING") == 2
    assert value(s, p, mirror="a", state="PAUSED") == 1
    assert value(s, p, mirror="b", state="PREPARING") == 1
    # every state of every mirror is a series, 0 when empty, so alerts see it from the start
    for m in ("a", "b"):
        for state in (
            "PREPARING",
            "MIRRORING",
            "PAUSING",
            "PAUSED",
            "STOPPING",
            "STOPPED",
            "FAILED",
        ):
            assert (p, (("mirror", m), ("state", state))) in s
    assert value(s, p, mirror="b", state="FAILED") == 0
    assert sum(v for (n, _), v in s.items() if n == p) == 4
    assert not any(dict(lbl).get("mirror") == "gone" for _, lbl in s)


def test_truncation_timeouts_are_counted_per_mirror_and_zero_filled() -> None:
    s = scrape(lambda: SNAP)
    name = "kafka_server_mirror_truncation_timeouts_total"
    assert value(s, name, mirror="b") == 2
    assert value(s, name, mirror="a") == 0  # a series from the start, so increase() sees the 1st
    assert (name, (("mirror", "gone"),)) not in s


def test_committed_lag_shows_a_stuck_last_stable_offset() -> None:
    snap = MirrorSnapshot(
        mirrors=("a",),
        states=STATES,
        partitions=(
            PartitionRow("a", "t", 0, "MIRRORING", 0, committed_lag=40),
            PartitionRow("a", "t", 1, "MIRRORING", 0),  # unknown: no series
        ),
    )
    got = scrape(lambda: snap)
    assert (
        value(got, "kafka_server_mirror_committed_lag", mirror="a", topic="t", partition="0") == 40
    )
    assert (
        "kafka_server_mirror_committed_lag",
        (("mirror", "a"), ("partition", "1"), ("topic", "t")),
    ) not in got


def test_lag_per_partition_and_max_lag_per_mirror() -> None:
    s = scrape(lambda: SNAP)
    lag = "kafka_server_mirror_consumer_lag"
    assert value(s, lag, mirror="a", topic="t", partition="0") == 5
    assert value(s, lag, mirror="a", topic="t", partition="1") == 12
    # unknown lag (paused, no answer yet) is no series rather than a misleading 0
    assert (lag, (("mirror", "a"), ("partition", "0"), ("topic", "u"))) not in s
    assert value(s, "kafka_server_mirror_max_lag", mirror="a") == 12
    assert value(s, "kafka_server_mirror_max_lag", mirror="b") == 0
    assert value(s, "kafka_server_mirror_failed_partitions", mirror="a") == 1
    assert value(s, "kafka_server_mirror_failed_partitions", mirror="b") == 0


def test_fetcher_counters_dead_fetchers_and_throttle() -> None:
    s = scrape(lambda: SNAP)
    one = {"mirror": "a", "source_broker": "1", "fetcher_id": "0"}
    assert value(s, "kafka_server_mirror_fetch_requests_total", **one) == 10
    assert value(s, "kafka_server_mirror_fetch_errors_total", **one) == 1
    assert value(s, "kafka_server_mirror_fetch_bytes_total", **one) == 5000
    assert value(s, "kafka_server_mirror_appended_bytes_total", **one) == 4000
    two = {**one, "source_broker": "2"}
    assert value(s, "kafka_server_mirror_appended_bytes_total", **two) == 600
    assert value(s, "kafka_server_mirror_dead_fetchers", mirror="a") == 1
    assert value(s, "kafka_server_mirror_dead_fetchers", mirror="b") == 0  # None: not running
    assert value(s, "kafka_server_mirror_replication_throttled_bytes_total", mirror="a") == 1200
    assert value(s, "kafka_server_mirror_replication_throttled_seconds_total", mirror="a") == 0.75
    assert value(s, "kafka_server_mirror_replication_throttled_rate_bytes") == 1e6


def test_metadata_sync_counters() -> None:
    s = scrape(lambda: SNAP)
    err = "kafka_server_mirror_metadata_sync_errors_total"
    assert value(s, err, mirror="a", kind="groups") == 3
    assert value(s, err, mirror="a", kind="partitions") == 1
    for kind in KIP_SYNC_ERROR_KINDS:
        assert (err, (("kind", kind), ("mirror", "b"))) in s
    assert value(s, err, mirror="b", kind="acls") == 0
    assert value(s, "kafka_server_mirror_metadata_sync_skipped_total", mirror="b", kind="acls") == 2
    last = "kafka_server_mirror_metadata_last_refresh_timestamp_seconds"
    assert value(s, last, mirror="a") == 1_700_000_000.5
    assert (last, (("mirror", "b"),)) not in s  # never refreshed yet


def test_no_snapshot_no_series() -> None:
    assert scrape(lambda: None) == {}


def test_no_mirrors_only_node_wide_series() -> None:
    s = scrape(lambda: MirrorSnapshot(mirrors=(), states=STATES))
    assert s == {("kafka_server_mirror_replication_throttled_rate_bytes", ()): 0.0}


# -- the snapshot builder -------------------------------------------------------------------


@dataclass
class FakeManager:
    infos: dict[tuple[str, int], PartitionInfo]
    truncation_timeouts: dict[str, int] = field(default_factory=dict)

    def partitions(self) -> dict[tuple[str, int], PartitionInfo]:
        return dict(self.infos)


class FakeBucket:
    rate: float | None = None


@dataclass
class FakeFetchers:
    statuses: dict[str, dict[tuple[str, int], FetchStatus]]
    stats: list[tuple[str, int, int, bool | None, FetcherCounters]] = field(default_factory=list)
    throttle: FakeBucket = field(default_factory=FakeBucket)

    def mirrors(self) -> list[str]:
        return list(self.statuses)

    def partitions(self, mirror: str) -> list[tuple[str, int]]:
        return list(self.statuses[mirror])

    def status(self, mirror: str, topic: str, partition: int) -> FetchStatus | None:
        return self.statuses[mirror].get((topic, partition))

    def fetcher_stats(self) -> list[tuple[str, int, int, bool | None, FetcherCounters]]:
        return self.stats

    def get_log(self, topic: str, partition: int) -> Any:
        lso = self.local_lso.get((topic, partition))
        return None if lso is None else FakeLog(lso)

    local_lso: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass
class FakeLog:
    last_stable_offset: int


@dataclass
class FakeSync:
    errors: dict[tuple[str, str], int] = field(default_factory=dict)
    skipped: dict[tuple[str, str], int] = field(default_factory=dict)
    last_refresh_ms: dict[str, int] = field(default_factory=dict)


def _status(hw: int, leo: int, error: str | None = None) -> FetchStatus:
    return FetchStatus(hw, hw, 0, leo, max(0, hw - leo) if hw >= 0 else 0, 1, 0.0, 1, error, False)


def test_build_snapshot_joins_states_with_fetch_status() -> None:
    tid = uuid.uuid4()
    image = MetadataImage(configs={(MIRROR_RESOURCE, "m"): {"bootstrap.servers": "src:9092"}})
    manager = FakeManager(
        {
            ("t", 0): PartitionInfo("m", tid, MirrorState.MIRRORING),
            ("t", 1): PartitionInfo("m", tid, MirrorState.MIRRORING),
            ("t", 2): PartitionInfo("m", tid, MirrorState.PAUSED),
        },
        {"m": 1},
    )
    fetchers = FakeFetchers(
        {"m": {("t", 0): _status(10, 4), ("t", 1): _status(-1, 0, "no leader at the source")}},
        [("m", 1, 0, True, FetcherCounters(requests=3, appended_bytes=100))],
    )
    fetchers.throttle.rate = 500.0
    fetchers.local_lso = {("t", 0): 3, ("t", 1): 0}  # t-0: a transaction held open here
    sync = FakeSync(errors={("m", "groups"): 1}, last_refresh_ms={"m": 5})
    snap = build_snapshot(image, manager, fetchers, sync)  # type: ignore[arg-type]
    assert snap.mirrors == ("m",)
    assert "UNKNOWN" not in snap.states and "MIRRORING" in snap.states
    rows = {(r.topic, r.partition): r for r in snap.partitions}
    assert rows[("t", 0)] == PartitionRow(
        "m", "t", 0, "MIRRORING", 6, False, committed_lag=7, held=0
    )
    assert rows[("t", 1)] == PartitionRow("m", "t", 1, "MIRRORING", None, True)
    assert rows[("t", 2)] == PartitionRow("m", "t", 2, "PAUSED", None, False)
    assert snap.fetchers == (FetcherRow("m", 1, 0, True, 3, 0, 0, 100, 0, 0.0),)
    assert snap.throttle_rate == 500.0
    assert snap.sync_errors == {("m", "groups"): 1} and snap.last_refresh_ms == {"m": 5}
    assert snap.truncation_timeouts == {"m": 1}
    # a copy: later changes to the live counters do not alter a snapshot already taken
    sync.errors[("m", "groups")] = 7
    assert snap.sync_errors[("m", "groups")] == 1


# -- reading on the event loop --------------------------------------------------------------


def test_read_on_loop_runs_the_builder_in_the_loop_thread(
    loop_thread: asyncio.AbstractEventLoop,
) -> None:
    seen: list[threading.Thread] = []

    def build() -> int:
        seen.append(threading.current_thread())
        return 42

    assert read_on_loop(loop_thread, build)() == 42
    assert seen and seen[0] is not threading.current_thread()


def test_read_on_loop_gives_up_on_a_blocked_loop(loop_thread: asyncio.AbstractEventLoop) -> None:
    release = threading.Event()
    loop_thread.call_soon_threadsafe(lambda: release.wait(5))  # blocks the loop
    calls: list[int] = []
    start = time.monotonic()
    assert read_on_loop(loop_thread, lambda: calls.append(1), timeout_s=0.2)() is None
    assert time.monotonic() - start < 3
    release.set()
    # the abandoned request never runs late (it was cancelled) and the next read works
    assert read_on_loop(loop_thread, lambda: 7)() == 7
    assert calls == []


def test_read_on_loop_survives_errors_and_a_closed_loop() -> None:
    def boom() -> int:
        raise ValueError("bug")

    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    assert read_on_loop(loop, boom)() is None
    assert read_on_loop(loop, lambda: 3)() == 3
    loop.call_soon_threadsafe(loop.stop)
    t.join(5)
    assert not t.is_alive()
    loop.close()
    assert read_on_loop(loop, lambda: 1)() is None


def test_read_on_loop_from_the_loop_itself_calls_directly() -> None:
    async def main() -> int | None:
        return read_on_loop(asyncio.get_running_loop(), lambda: 5)()

    assert asyncio.run(main()) == 5


def test_lag_runs_to_the_source_last_stable_offset() -> None:
    """A READ_COMMITTED mirror copies up to the source's LSO: records behind a transaction
    open on the source are held, not lag (issue 32)."""
    assert copyable_lag(10, 8, 8) == (0, 2)  # caught up; 2 behind an open source transaction
    assert copyable_lag(10, 8, 5) == (3, 2)
    assert copyable_lag(10, 10, 4) == (6, 0)  # nothing open: to the HW, as before
    assert copyable_lag(10, -1, 4) == (6, 0)  # LSO unknown: to the HW
    assert copyable_lag(-1, -1, 4) == (0, 0)  # nothing learnt yet
    status = FetchStatus(10, 8, 0, 8, *copyable_lag(10, 8, 8)[:1], 1, 0.0, 1, None, False, 2)
    fetchers = FakeFetchers({"m": {("t", 0): status}}, [])
    fetchers.local_lso = {("t", 0): 8}
    image = MetadataImage(configs={(MIRROR_RESOURCE, "m"): {"bootstrap.servers": "src:9092"}})
    manager = FakeManager({("t", 0): PartitionInfo("m", uuid.uuid4(), MirrorState.MIRRORING)}, {})
    snap = build_snapshot(image, manager, fetchers, FakeSync())  # type: ignore[arg-type]
    (row,) = snap.partitions
    assert (row.lag, row.committed_lag, row.held) == (0, 0, 2)
    samples = scrape(lambda: snap)
    where = {"mirror": "m", "topic": "t", "partition": "0"}
    assert value(samples, "kafka_server_mirror_consumer_lag", **where) == 0
    assert value(samples, "kafka_server_mirror_source_open_transaction_records", **where) == 2
