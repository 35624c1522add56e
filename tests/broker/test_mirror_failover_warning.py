"""Failover truncates a mirror partition to its LSO; when that deletes records past an open
transaction, the broker says so at WARN with the offsets and the producer holding the LSO."""

import asyncio
import logging
from typing import Any

import pytest

from broker.log.clock import ManualClock
from broker.log.producer_state import ProducerStateManager
from broker.metadata.mirror_states import MirrorState
from broker.mirror.manager import MirrorManager
from protocol.records import Record, build_batch

from .test_mirror_manager import _set, _settle
from .test_mirror_manager import world as world  # the fixture

PID = 42


def test_failover_past_an_open_transaction_warns(
    world: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    plog = world["plog"]  # offsets 0-2 mirrored, no transaction
    plog.load_producer_state(ProducerStateManager(plog.dir, ManualClock(1_700_000_000_000)))
    plog.append_raw(
        build_batch(
            [Record(value=b"t0"), Record(value=b"t1")],
            base_offset=3,
            partition_leader_epoch=7,
            producer_id=PID,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        + build_batch([Record(value=b"plain")], base_offset=5, partition_leader_epoch=7),
        now_ms=1_700_000_000_000,
    )
    plog.high_watermark = plog.log_end_offset
    assert (plog.last_stable_offset, plog.log_end_offset) == (3, 6)

    async def run() -> None:
        m: MirrorManager = world["manager"]
        m.reconcile_all()
        await _settle(m)
        _set(world, "m.removed")
        await _settle(m)
        assert world["states"].states[("m", world["tid"], 0)] == MirrorState.STOPPED

    with caplog.at_level(logging.WARNING, logger="broker.mirror.manager"):
        asyncio.run(run())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    expected = f"truncating t-0 from 6 to LSO 3: transaction of producer {PID} open since 3"
    assert f"mirror m: {expected}" in warnings, warnings
    assert world["manager"].reason("t", 0) == f"failover: {expected}"  # for --describe
    assert plog.log_end_offset == 4  # truncated to 3, then the MIRROR_PID_RESET


def test_failover_with_nothing_past_the_lso_is_quiet(
    world: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def run() -> None:
        m: MirrorManager = world["manager"]
        m.reconcile_all()
        await _settle(m)
        _set(world, "m.removed")
        await _settle(m)

    with caplog.at_level(logging.WARNING, logger="broker.mirror.manager"):
        asyncio.run(run())
    assert not [r for r in caplog.records if "truncating" in r.getMessage()]
