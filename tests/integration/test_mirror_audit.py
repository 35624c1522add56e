"""The PySpark audit over a real mirror: the destination's segments are IDENTICAL to the source's."""

import json
import subprocess
from pathlib import Path

from .clients import create_topic
from .mirror_helpers import (
    create_mirror,
    produce_numbered,
    running,
    wait_caught_up,
    write_mirror_config,
)
from .node import ROOT, Node

TOPIC = "orders"
PARTITIONS = 2


def test_audit_finds_a_real_mirror_identical(tmp_path: Path) -> None:
    src, dst = Node(tmp_path / "src"), Node(tmp_path / "dst")
    with running(src, dst, clean_stop=True):  # stopped cleanly: the audit reads their segments
        create_topic(src.bootstrap, TOPIC, PARTITIONS)
        assert not produce_numbered(src.bootstrap, TOPIC, 500)
        props = write_mirror_config(tmp_path / "m.properties", src.bootstrap)
        create_mirror(dst, "m", props, TOPIC)
        wait_caught_up(
            src.bootstrap, dst.bootstrap, TOPIC, PARTITIONS, "the mirror to catch up", step=0.2
        )
    out = tmp_path / "audit"
    run = subprocess.run(
        [
            str(ROOT / "bin" / "kafka-mirror-audit.sh"),
            "--source",
            str(src.log_dir),
            "--destination",
            str(dst.log_dir),
            "--output",
            str(out),
            "--master",
            "local[2]",
            "--topics",
            TOPIC,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdicts"] == {
        "IDENTICAL": PARTITIONS,
        "LAGGING": 0,
        "DIVERGED": 0,
        "MISSING": 0,
    }
    parts = {p["partition"]: p for p in report["partitions"]}
    assert sorted(parts) == list(range(PARTITIONS))
    assert sum(p["source_records"] for p in parts.values()) == 500
    assert all(p["matched_batches"] == p["source_batches"] > 0 for p in parts.values())
