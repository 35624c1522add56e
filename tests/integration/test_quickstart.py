"""The README's main job (bin/quickstart.sh -> broker.cli.quickstart), run as a process: it
mirrors, shows that topic ids and bytes are equal, fails over; and with --keep, a SIGTERM to it
stops the nodes it started instead of orphaning them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def test_the_main_job_mirrors_identical_bytes_and_fails_over(tmp_path: Path) -> None:
    proc = _quickstart(tmp_path, "--records", "2000")
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    assert re.search(r"topic id: source (\S+), destination \1 \(same\)", out), out
    assert out.count(", identical") == 3, out
    assert "a stock consumer read 2000 records from the mirror topic" in out, out
    assert "destination end offsets now sum to 2004" in out, out
    assert "Traceback" not in out


def test_sigterm_with_keep_stops_the_nodes(tmp_path: Path) -> None:
    proc = _quickstart(tmp_path, "--records", "500", "--keep")
    assert proc.stdout is not None
    pids: list[int] = []
    deadline = time.monotonic() + 240
    lines = []
    for line in proc.stdout:
        lines.append(line)
        m = re.search(r"nodes left running \(pids ([\d ]+)\)", line)
        if m:
            pids = [int(p) for p in m.group(1).split()]
            break
        assert time.monotonic() < deadline, "".join(lines)
    assert len(pids) == 2, "".join(lines)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    assert "nodes stopped" in rest, rest
    for pid in pids:  # children of the quickstart, reaped by it: gone
        assert (
            not Path(f"/proc/{pid}").exists()
            or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        )
