"""The PySpark audit over a real mirror: the destination's segments are IDENTICAL to the source's."""

import json
import subprocess
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from .node import ROOT, Node
from .test_mirror_e2e import PARTITIONS, TOPIC, _end_offsets, _produce, _tool, _wait


def test_audit_finds_a_real_mirror_identical(tmp_path: Path) -> None:
    src, dst = Node(tmp_path / "src"), Node(tmp_path / "dst")
    src.start()
    dst.start()
    try:
        admin = AdminClient({"bootstrap.servers": src.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            f.result(15)
        assert not _produce(src.bootstrap, 500)
        props = tmp_path / "m.properties"
        props.write_text(f"bootstrap.servers={src.bootstrap}\n")
        _tool(dst, "--create", "--mirror", "m", "--mirror-config", str(props))
        _tool(dst, "--add", "--topic", TOPIC, "--mirror", "m")
        ends = _end_offsets(src.bootstrap)
        _wait("the mirror to catch up", lambda: _end_offsets(dst.bootstrap) == ends)
    finally:
        dst.stop()
        src.stop()
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
