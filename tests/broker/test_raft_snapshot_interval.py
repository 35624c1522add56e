"""KIP-876 time-based snapshots in the Raft core: ``SnapshotWanted`` once the last snapshot (or
the start) is ``max_snapshot_interval_ms`` old and something was committed since, never when
nothing new is committed, never with an interval of 0."""

from __future__ import annotations

import random

from broker.raft.core import RaftConfig, RaftCore, SnapshotWanted
from broker.raft.outputs import Output
from broker.raft.quorum_state import MemoryQuorumStateStore
from broker.raft.replicated_log import MemoryLog

BIG = 1 << 40  # the byte trigger never fires here


def lone_voter(interval_ms: int) -> tuple[RaftCore, list[Output]]:
    core = RaftCore(
        1,
        frozenset({1}),
        MemoryLog(),
        MemoryQuorumStateStore(),
        random.Random(1),
        RaftConfig(max_bytes_between_snapshots=BIG, max_snapshot_interval_ms=interval_ms),
    )
    out = core.start(0)  # elects itself and commits its LeaderChange entry at t=0
    assert core.is_leader and core.high_watermark > 0
    return core, out


def wanted(outputs: list[Output]) -> list[int]:
    return [o.end_offset for o in outputs if isinstance(o, SnapshotWanted)]


def test_a_snapshot_is_wanted_once_a_committed_entry_waited_the_interval() -> None:
    core, out = lone_voter(1000)
    out += core.tick(999)
    assert wanted(out) == []
    out = core.tick(1000)
    assert wanted(out) == [core.high_watermark]
    assert wanted(core.tick(5000)) == []  # asked once until answered
    core.snapshot(5000, core.high_watermark, b"state")
    assert wanted(core.tick(9000)) == []  # nothing committed since the snapshot
    _, more = core.append(9500, [b"c"])  # committed at once: a lone voter is a majority
    assert wanted(more + core.tick(10_499)) == []  # the entry waits from 9500, not from 5000
    assert wanted(core.tick(10_500)) == [core.high_watermark]


def test_a_stale_answer_is_asked_again_after_another_interval() -> None:
    core, _ = lone_voter(1000)
    assert wanted(core.tick(1000)) == [core.high_watermark]
    core.snapshot(1000, 0, b"")  # not after the log start: ignored
    assert wanted(core.tick(1500)) == []  # the wait starts again here
    assert wanted(core.tick(2499)) == []
    assert wanted(core.tick(2500)) == [core.high_watermark]


def test_zero_disables_time_based_snapshots() -> None:
    core, _ = lone_voter(0)
    core.append(10, [b"a"])
    assert wanted(core.tick(10**9)) == []
