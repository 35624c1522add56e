from __future__ import annotations

import re
import subprocess
from pathlib import Path

from broker.config.meta_properties import (
    MetaProperties,
    parse_uuid,
    random_uuid,
    read_meta_properties,
    write_meta_properties,
)

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "bin" / "kafka-storage.sh"
UUID_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TOOL), *args], capture_output=True, text=True, timeout=60)


def config(tmp_path: Path) -> Path:
    text = (ROOT / "config/server.properties").read_text()
    f = tmp_path / "server.properties"
    f.write_text(text.replace("/tmp/kmirror-logs", str(tmp_path / "logs")))
    return f


def test_random_uuid_format() -> None:
    for _ in range(200):
        u = random_uuid()
        assert UUID_RE.match(u) and not u.startswith("-")
        assert len(parse_uuid(u)) == 16


def test_meta_properties_round_trip(tmp_path: Path) -> None:
    meta = MetaProperties("him7SuHuQaqL4kALYL9xgA", 3, random_uuid())
    path = write_meta_properties(tmp_path, meta, fsync=False)
    lines = path.read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert "version=1" in lines and "node.id=3" in lines
    assert read_meta_properties(tmp_path) == meta


def test_cli_end_to_end(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    r = run("random-uuid")
    assert r.returncode == 0
    cid = r.stdout.strip()
    assert UUID_RE.match(cid)

    r = run("format", "-t", cid, "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    assert f"Formatting metadata directory {tmp_path / 'logs'} with metadata.version" in r.stdout
    meta = read_meta_properties(tmp_path / "logs")
    assert meta.cluster_id == cid and meta.node_id == 1 and meta.directory_id

    r = run("format", "-t", cid, "-c", str(cfg))
    assert r.returncode == 1
    assert "is already formatted. Use --ignore-formatted" in r.stderr

    r = run("format", "-t", cid, "-c", str(cfg), "--ignore-formatted")
    assert r.returncode == 0
    assert "All of the log directories are already formatted." in r.stdout
    assert read_meta_properties(tmp_path / "logs") == meta  # untouched

    r = run("info", "-c", str(cfg))
    assert r.returncode == 0
    assert f"cluster.id={cid}" in r.stdout


def test_cli_errors(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    r = run("format", "-t", "not-a-uuid", "-c", str(cfg))
    assert r.returncode == 1 and "does not appear to be a valid UUID" in r.stderr
    r = run("format", "-c", str(cfg))
    assert r.returncode == 1 and "--cluster-id" in r.stderr
    r = run("format", "-t", random_uuid(), "-c", str(tmp_path / "missing.properties"))
    assert r.returncode == 1 and "cannot read" in r.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text(cfg.read_text() + "no.such.key=1\n")
    r = run("format", "-t", random_uuid(), "-c", str(bad))
    assert r.returncode == 1 and "no.such.key" in r.stderr
    r = run("info", "-c", str(cfg))
    assert r.returncode == 1 and "does not exist" in r.stdout
    assert not (tmp_path / "logs").exists()
