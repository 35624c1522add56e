"""The README's main job (bin/quickstart.sh -> broker.cli.quickstart), run as a process: it
mirrors into a one-node and a three-node destination, shows that topic ids and bytes are equal (on
every destination replica), explains the offsets after failover and prints a small metrics table;
a SIGTERM stops every node it started (their printed PIDs are gone afterwards); with --keep it
leaves them running and prints how to stop them; a bad --destination-nodes is refused."""

from __future__ import annotations

import json
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
    return [
        int(p) for p in re.findall(r"^(?:source|destination(?:-\d)?) node: pid (\d+),", out, re.M)
    ]


def _assert_mirrored_and_failed_over(out: str, records: int, identical_lines: int) -> None:
    assert "Traceback" not in out
    m = re.search(r"topic id: source (\S+), destination (\S+) \(same\)", out)
    assert m and m.group(1) == m.group(2) and re.fullmatch(r"[A-Za-z0-9_-]{22}", m.group(1)), out
    assert out.count(", identical") == identical_lines, out
    assert "DIFFERENT" not in out, out
    m = re.search(
        r"^bytes identical: yes \(([\d,]+) bytes of record batches in 3 partitions", out, re.M
    )
    assert m and int(m.group(1).replace(",", "")) > 0, out
    lags = re.findall(r"^dr\s+quickstart\s+\d\s+\d+\s+\d+\s+(\S+)\s+MIRRORING", out, re.M)
    assert lags == ["0", "0", "0"], out
    assert f"a stock consumer read {records} records from the mirror topic" in out, out
    assert "a producer wrote to it with acks=all" in out, out
    assert "so each\n  ended one offset past the source's before the new record" in out, out
    assert f"destination end offsets now sum to {records + 4}" in out, out
    # the closing table: named metrics, counts as integers (no 1.234e+04, no .0)
    table = out.split("the destination's metrics", 1)[1].splitlines()[1:7]
    rows = {r.split()[-1]: r.split()[-2] for r in table}
    assert re.fullmatch(r"[\d,]+", rows["kafka_server_mirror_appended_bytes_total"]), table
    assert rows["kafka_server_mirror_failed_partitions"] == "0", table
    assert rows["kafka_server_mirror_fetch_errors_total"] == "0", table


def test_the_main_job_mirrors_identical_bytes_and_fails_over(tmp_path: Path) -> None:
    args = ("--records", "2000", "--destination-nodes", "1")
    rc, out = _finish(_quickstart(tmp_path, *args), 240)
    assert rc == 0, out
    _assert_mirrored_and_failed_over(out, 2000, identical_lines=3)
    pids = _node_pids(out)
    assert len(pids) == 2 and "nodes stopped" in out, out
    assert all(_gone(pid) for pid in pids), out


def test_a_three_node_destination_holds_identical_bytes_on_every_replica(tmp_path: Path) -> None:
    """The default: one KRaft quorum of three combined nodes, RF=3 and min.insync.replicas=2 for
    the mirror topic and the internal topics; every replica of every partition byte-identical."""
    rc, out = _finish(_quickstart(tmp_path, "--records", "1500"), 240)
    assert rc == 0, out
    _assert_mirrored_and_failed_over(out, 1500, identical_lines=9)
    names = re.findall(r"^(\S+) node: bootstrap", out, re.M)
    assert names == ["source", "destination-1", "destination-2", "destination-3"], out
    assert "replication factor 3, min.insync.replicas 2" in out, out
    replicas = re.findall(
        r"^  partition \d: leader node \d, replicas (.*), in sync (.*)$", out, re.M
    )
    assert len(replicas) == 3, out
    assert all(sorted(json.loads(r)) == [1, 2, 3] == json.loads(i) for r, i in replicas), out
    for n in (1, 2, 3):
        config = (tmp_path / "qs" / f"destination-{n}" / "server.properties").read_text()
        for key in (
            "default.replication.factor",
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
            "mirror.topic.replication.factor",
        ):
            assert f"\n{key}=3\n" in config, (key, config)
        assert "\nmin.insync.replicas=2\n" in config, config
        assert "\ntransaction.state.log.min.isr=2\n" in config, config
    pids = _node_pids(out)
    assert len(pids) == 4 and "nodes stopped" in out, out
    assert all(_gone(pid) for pid in pids), out


def test_a_bad_destination_node_count_is_refused_by_argparse(tmp_path: Path) -> None:
    for bad, said in (("2", "invalid choice: 2 (choose from 1, 3)"), ("x", "invalid int value")):
        rc, out = _finish(_quickstart(tmp_path, "--destination-nodes", bad), 60)
        assert rc == 2, out
        assert f"argument --destination-nodes: {said}" in out, out
        assert "node: pid" not in out, out  # refused before any node starts


def test_sigterm_stops_the_nodes(tmp_path: Path) -> None:
    """SIGTERM while the demo runs (far more records than it can produce before the signal):
    the four nodes it printed (a source and a destination quorum of three) are stopped, not
    orphaned."""
    proc = _quickstart(tmp_path, "--records", "50000000")
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()  # reads to EOF, so a silent quickstart cannot block the test
    left: list[int] = []
    try:
        wait_for(
            lambda: any(x.startswith("destination-3 node: bootstrap") for x in lines),
            120,
            "every node started",
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
    assert len(_node_pids(out)) == 4, out
    assert not left, f"still running after the quickstart exited: {left}\n{out}"
    assert "interrupted (SIGTERM)" in out and "nodes stopped" in out, out
    assert proc.returncode == 1, out


def test_keep_leaves_the_nodes_running_and_says_how_to_stop_them(tmp_path: Path) -> None:
    rc, out = _finish(_quickstart(tmp_path, "--records", "500", "--keep"), 240)
    assert rc == 0, out
    pids = _node_pids(out)
    assert len(pids) == 4, out
    try:
        names = ["source", "destination-1", "destination-2", "destination-3"]
        listed = ", ".join(f"{name} pid {pid}" for name, pid in zip(names, pids, strict=True))
        assert f"nodes left running: {listed}" in out, out
        m = re.search(r"^stop them with: kill ([\d ]+)$", out, re.M)
        assert m and [int(p) for p in m.group(1).split()] == pids, out
        assert not any(_gone(pid) for pid in pids), out  # still serving after we exited
    finally:
        for pid in pids:  # the printed command, done here: SIGTERM by PID, all at once
            if not _gone(pid):
                os.kill(pid, signal.SIGTERM)
    wait_for(lambda: all(_gone(pid) for pid in pids), 30, "the kept nodes to stop")
