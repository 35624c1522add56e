"""Start-up of a real node process: failures are one line naming the config key, and SIGTERM
stops a start-up that is still recovering logs."""

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.records import Record, build_batch

from .clients import wait_for
from .node import ROOT, Node

START_TIMEOUT = 30.0


def _run_broker(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def taken_port() -> Iterator[socket.socket]:
    """A loopback port another process (this test) listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


def _one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 1, res
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_listener_port_in_use_is_one_line(tmp_path: Path, taken_port: socket.socket) -> None:
    port = taken_port.getsockname()[1]
    node = Node(tmp_path / "n")
    node.port = port
    node.settings["listeners"] = (
        f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{node.controller_port}"
    )
    node.settings["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
    node.format()
    line = _one_line_error(_run_broker(node.config_path))
    assert "listeners" in line and f"PLAINTEXT://127.0.0.1:{port}" in line, line
    assert "address already in use" in line, line


def test_metrics_port_in_use_is_one_line(tmp_path: Path, taken_port: socket.socket) -> None:
    port = taken_port.getsockname()[1]
    node = Node(tmp_path / "n", metrics__port=str(port))
    node.format()
    res = _run_broker(node.config_path)
    line = _one_line_error(res)
    assert "metrics.port" in line and f"127.0.0.1:{port}" in line, line
    assert "address already in use" in line, line
    # what start-up opened (listeners, logs) was closed, as at a shutdown
    assert "stopped" in res.stdout, res.stdout
    assert (node.log_dir / ".kafka_cleanshutdown").exists()


def test_unusable_log_dir_is_one_line(tmp_path: Path) -> None:
    """The log dir's lock file cannot be opened (here: it is a directory; as a non-root user a
    read-only dir fails the same way)."""
    node = Node(tmp_path / "n")
    node.format()
    lock = node.log_dir / ".lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()
    line = _one_line_error(_run_broker(node.config_path))
    assert line.startswith("kmirror: log.dirs: ") and str(lock) in line, line


# -- SIGTERM during start-up ---------------------------------------------------------------

PARTITIONS = 10
# An unflushed segment of this many one-record batches is validated batch by batch after a
# kill -9: ~6 s on a laptop, a real stall. (1000 empty partitions were one once, when opening
# each recovered index read its 10 MiB preallocated tail; they now take about a second.)
STALL_BATCHES = 1_500_000


def _write_unflushed_segment(node: Node, topic: str, batches: int) -> None:
    """Fill partition 0's (empty, never flushed) segment with ``batches`` valid batches."""
    one = build_batch(
        [Record(key=None, value=b"x" * 10, timestamp_delta=0)],
        base_timestamp=int(time.time() * 1000),
        partition_leader_epoch=0,
    )
    data = bytearray(one * batches)
    for i in range(batches):
        struct.pack_into(">q", data, i * len(one), i)  # the base offset: outside the CRC
    (node.log_dir / f"{topic}-0" / "00000000000000000000.log").write_bytes(data)


def test_sigterm_during_log_recovery_stops_the_node(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    try:
        node.start(START_TIMEOUT)
        admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 0})
        for fut in admin.create_topics(
            [NewTopic("many", PARTITIONS, 1)], request_timeout=60
        ).values():
            fut.result(60)
        node.kill()  # unclean: the next start recovers every partition
        _write_unflushed_segment(node, "many", STALL_BATCHES)
        before = len(node.output.read_bytes())
        with node.output.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "broker", str(node.config_path)],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        node.proc = proc

        def output() -> str:
            return node.output.read_bytes()[before:].decode(errors="replace")

        def stalled() -> bool:
            text = output()
            if "start-up: still recovering the logs" in text:
                return True
            assert proc.poll() is None, text
            assert "started" not in text, f"start-up did not stall:\n{text}"
            return False

        wait_for(stalled, 60, "the start-up to report recovery", detail=output)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(20)
        took = time.monotonic() - t0
        assert rc == 0, output()
        assert took < 5.0, f"stopping during start-up took {took:.1f}s"
        text = output()
        assert "Traceback" not in text and "started" not in text, text
        assert "SIGTERM during start-up" in text, text
    finally:
        node.kill()
