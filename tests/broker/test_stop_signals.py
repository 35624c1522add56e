"""SIGTERM/SIGINT at any point of start-up (broker/stop_signals.py, node_process.run): before
the event loop drives start-up they cut synchronous work short; after, they cancel start-up."""

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker import app, node_process
from broker.config.server_config import load_server_config
from broker.log.manager import CLEAN_SHUTDOWN_FILE
from broker.stop_signals import StartupInterrupted, StopSignals


@pytest.fixture
def signals() -> Iterator[StopSignals]:
    s = StopSignals()
    s.install()
    try:
        yield s
    finally:
        s.restore()


def _busy(seconds: float) -> None:
    """Synchronous work, as log recovery is (bounded)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sum(range(1000))


def test_a_signal_interrupts_synchronous_start_up_once(signals: StopSignals) -> None:
    t0 = time.monotonic()
    with pytest.raises(StartupInterrupted):
        os.kill(os.getpid(), signal.SIGTERM)
        _busy(5.0)
    assert time.monotonic() - t0 < 1.0
    assert signals.received is signal.SIGTERM
    os.kill(os.getpid(), signal.SIGINT)  # during the unwinding: recorded, not raised again
    _busy(0.1)
    assert signals.received is signal.SIGINT


def test_after_attach_a_signal_calls_back_on_the_loop(signals: StopSignals) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        signals.attach(asyncio.get_running_loop(), stop.set)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 5)

    asyncio.run(main())
    assert signals.received is signal.SIGTERM


def test_a_signal_before_attach_is_not_lost(signals: StopSignals) -> None:
    with pytest.raises(StartupInterrupted):
        os.kill(os.getpid(), signal.SIGTERM)
        _busy(5.0)

    async def main() -> None:
        stop = asyncio.Event()
        signals.attach(asyncio.get_running_loop(), stop.set)
        await asyncio.wait_for(stop.wait(), 5)

    asyncio.run(main())


def test_a_signal_cancels_a_stalled_start_and_closes_the_node(
    tmp_path: Path, signals: StopSignals, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node's start is replaced by one that never ends (what a start stuck on a slow disk
    or a lost peer looks like to run()): SIGTERM ends run() within a bound, not at start's end."""
    props = tmp_path / "server.properties"
    log_dir = tmp_path / "logs"
    props.write_text(
        "process.roles=broker,controller\nnode.id=1\n"
        "controller.quorum.voters=1@127.0.0.1:9093\n"
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={log_dir}\n"
    )
    config, _warnings = load_server_config(props)
    cancelled: list[bool] = []

    async def stalled_start(_node: app.Node) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    monkeypatch.setattr(app.Node, "start", stalled_start)
    t0 = time.monotonic()
    asyncio.run(asyncio.wait_for(node_process.run(config, "cluster", None, signals), 30))
    assert time.monotonic() - t0 < 10
    assert cancelled == [True]
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()  # what start-up opened was closed
