"""The README's main job (bin/quickstart.sh -> broker.cli.quickstart), run as a process: it
mirrors, shows that topic ids and bytes are equal, explains the offsets after failover and
prints a small metrics table; a SIGTERM stops the nodes it started (their printed PIDs are gone
afterwards); with --keep it leaves them running and prints how to stop them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .clients import wait_for
from .node import ROOT


def _quickstart(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "broker.cli.quickstart", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KMIRROR_QUICKSTART_DIR": str(tmp_path / "qs")},
    )


def _finish(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    """Its exit code and whole output once it exits. If it does not in time: SIGTERM it, stop every node it
    named (by PID), and fail, so a stuck run leaves nothing behind."""
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        for pid in _node_pids(out):
            if not _gone(pid):
                os.kill(pid, signal.SIGTERM)
        raise AssertionError(f"the quickstart did not end within {timeout}s:\n{out}") from None


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie waiting for a parent that is not ours."""
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return True


def _node_pids(out: str) -> list[int]:
    return [int(p) for p in re.findall(r"^(?:source|destination) node: pid (\d+),", out, re.M)]


def test_the_main_job_mirrors_identical_bytes_and_fails_over(tmp_path: Path) -> None:
    rc, out = _finish(_quickstart(tmp_path, "--records", "2000"), 240)
    assert rc == 0, out
    assert "Traceback" not in out
    m = re.search(r"topic id: source (\S+), destination (\S+) \(same\)", out)
    assert m and m.group(1) == m.group(2) and re.fullmatch(r"[A-Za-z0-9_-]{22}", m.group(1)), out
    assert out.count(", identical") == 3, out
    m = re.search(
        r"^bytes identical: yes \(([\d,]+) bytes of record batches in 3 partitions", out, re.M
    )
    assert m and int(m.group(1).replace(",", "")) > 0, out
    assert "a stock consumer read 2000 records from the mirror topic" in out, out
    assert "so each\n  ended one offset past the source's before the new record" in out, out
    assert "destination end offsets now sum to 2004" in out, out
    # the closing table: named metrics, counts as integers (no 1.234e+04, no .0)
    table = out.split("the destination's metrics", 1)[1].splitlines()[1:7]
    rows = {r.split()[-1]: r.split()[-2] for r in table}
    assert re.fullmatch(r"[\d,]+", rows["kafka_server_mirror_appended_bytes_total"]), table
    assert rows["kafka_server_mirror_failed_partitions"] == "0", table
    assert rows["kafka_server_mirror_fetch_errors_total"] == "0", table
    pids = _node_pids(out)
    assert len(pids) == 2 and "nodes stopped" in out, out
    assert all(_gone(pid) for pid in pids), out


def test_sigterm_stops_the_nodes(tmp_path: Path) -> None:
    """SIGTERM while the demo runs (far more records than it can produce before the signal):
    the nodes it printed are stopped, not orphaned."""
    proc = _quickstart(tmp_path, "--records", "50000000")
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()  # reads to EOF, so a silent quickstart cannot block the test
    left: list[int] = []
    try:
        wait_for(
            lambda: any(x.startswith("destination node: bootstrap") for x in lines),
            120,
            "both nodes started",
            detail=lambda: "".join(lines),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(10)
        left = [pid for pid in _node_pids("".join(lines)) if not _gone(pid)]
        for pid in left:  # the test leaves nothing behind, even when the quickstart did
            os.kill(pid, signal.SIGTERM)
    out = "".join(lines)
    assert len(_node_pids(out)) == 2, out
    assert not left, f"still running after the quickstart exited: {left}\n{out}"
    assert "interrupted (SIGTERM)" in out and "nodes stopped" in out, out
    assert proc.returncode == 1, out


def test_keep_leaves_the_nodes_running_and_says_how_to_stop_them(tmp_path: Path) -> None:
    rc, out = _finish(_quickstart(tmp_path, "--records", "500", "--keep"), 240)
    assert rc == 0, out
    pids = _node_pids(out)
    assert len(pids) == 2, out
    try:
        assert f"nodes left running: source pid {pids[0]}, destination pid {pids[1]}" in out, out
        m = re.search(r"^stop them with: kill (\d+) (\d+)$", out, re.M)
        assert m and [int(m.group(1)), int(m.group(2))] == pids, out
        assert not any(_gone(pid) for pid in pids), out  # still serving after we exited
    finally:
        for pid in pids:  # the printed command, done here: SIGTERM by PID
            if not _gone(pid):
                os.kill(pid, signal.SIGTERM)
    wait_for(lambda: all(_gone(pid) for pid in pids), 30, "the kept nodes to stop")
