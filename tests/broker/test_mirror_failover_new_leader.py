"""A new leader redoing STOPPING: its HW is the one it had as a follower, possibly behind the
old leader's, so its LSO cut waits until that HW reaches the start offset of its epoch. Cut at
the lagging HW, it would drop records the old leader had committed, here the old leader's
committed MIRROR_PID_RESET marker."""

import asyncio
from typing import Any

import pytest

from broker.metadata.mirror_states import MirrorState
from broker.mirror import failover as failover_module
from protocol.records import Record, build_batch, build_mirror_pid_reset

from .test_mirror_manager import (
    _followers_fetch,
    _markers,
    _removed,
    _settle,
    _three_replicas,
)
from .test_mirror_manager import world as world  # the fixture

NOW = 1_700_000_000_000


def test_a_new_leader_cuts_only_once_its_hw_reached_its_epoch_start(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    world["now_ms"] = lambda: NOW
    monkeypatch.setattr(failover_module, "LEADER_HW_WAIT_S", 0.1)
    monkeypatch.setattr(failover_module, "MARKER_COMMIT_WAIT_S", 0.1)
    plog = world["plog"]  # offsets 0-2 mirrored at source epoch 7
    # the old leader's marker (bumped epoch 8) at offset 3, committed there (its HW was 4);
    # this node, a follower then, last learnt HW 2
    plog.append_raw(
        build_mirror_pid_reset("source-cluster", base_offset=3, partition_leader_epoch=8),
        now_ms=NOW,
    )
    plog.high_watermark = 2

    async def run() -> None:
        hosted = _three_replicas(world, (1, 2, 3))
        assert (hosted.leader.epoch_start_offset, hosted.leader.high_watermark) == (4, 2)
        hosted.leader_epoch = 9  # elected after the old leader's bumped epoch 8

        m, key = await _removed(world, hosted, MirrorState.STOPPING, lme=7)
        # nothing cut (an LSO from HW 2 would take offsets 2-3, the committed marker too)
        assert plog.log_end_offset == 4 and len(_markers(plog)) == 1
        assert world["states"].states[key] == MirrorState.STOPPING
        reason = m.reason("t", 0) or ""
        assert "waiting for the high watermark to reach 4" in reason
        assert "(high watermark 2, ISR [1, 2, 3])" in reason
        _followers_fetch(hosted, 4, 8)  # the followers fetch in the new epoch: the HW reaches 4
        assert hosted.leader.high_watermark == 4
        m.reconcile_all()
        await _settle(m)
        # the LSO is 4 now: the old marker stays, this leader's follows at 4 (no bump: epoch 9
        # is above every epoch in the log)
        markers = _markers(plog)
        assert [(b.base_offset, b.partition_leader_epoch) for b in markers] == [(3, 8), (4, 9)]
        _followers_fetch(hosted, 5, 9)
        m.reconcile_all()
        await _settle(m)
        assert world["states"].states[key] == MirrorState.STOPPED, world["states"].history

    asyncio.run(run())


def test_a_new_leader_bumps_above_the_mirrored_epochs_it_kept(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new leader holds a mirrored record of source epoch 9 that the old leader cut as
    uncommitted before recording LME 7 with STOPPING; committed now, it stays, so the marker's
    epoch must be above 9, not only above the recorded LME."""
    world["now_ms"] = lambda: NOW
    monkeypatch.setattr(failover_module, "LEADER_HW_WAIT_S", 0.1)
    monkeypatch.setattr(failover_module, "MARKER_COMMIT_WAIT_S", 0.1)
    plog = world["plog"]  # offsets 0-2 mirrored at source epoch 7
    plog.append_raw(
        build_batch([Record(value=b"late")], base_offset=3, partition_leader_epoch=9), now_ms=NOW
    )
    plog.high_watermark = 3
    bumps: list[int] = []

    async def run() -> None:
        hosted = _three_replicas(world, (1, 2, 3))

        m, _ = await _removed(world, hosted, MirrorState.STOPPING, lme=7, bumps=bumps)
        assert not bumps and plog.log_end_offset == 4  # waiting for the HW to reach 4
        _followers_fetch(hosted, 4, 9)
        m.reconcile_all()
        await _settle(m)
        assert bumps == [10]
        markers = _markers(plog)
        assert [(b.base_offset, b.partition_leader_epoch) for b in markers] == [(4, 10)]

    asyncio.run(run())
