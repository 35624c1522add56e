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
from broker.quorum.metadata_log import MetadataLog
from broker.raft import messages as m
from broker.raft.messages import SnapshotId
from broker.raft.voter_set import VoterSet
from protocol.records.kraft_control import decode_kraft_version

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


# --- KIP-853: dynamic quorums -------------------------------------------------------------------


def dynamic_config(tmp_path: Path, node_id: int = 1) -> Path:
    """A controller that finds its quorum through controller.quorum.bootstrap.servers."""
    f = tmp_path / "controller.properties"
    f.write_text(
        "process.roles=controller\n"
        f"node.id={node_id}\n"
        "controller.quorum.bootstrap.servers=localhost:9093,localhost:9095\n"
        "listeners=CONTROLLER://localhost:9093\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={tmp_path / 'logs'}\n"
    )
    return f


def bootstrap_voters(tmp_path: Path) -> tuple[int, VoterSet | None]:
    """(kraft.version, voters) of the bootstrap snapshot format wrote."""
    sid = SnapshotId(0, 0)
    control = dict(MetadataLog.snapshot_control_of(tmp_path / "logs" / "__cluster_metadata-0", sid))
    voters = control.get(m.KRAFT_VOTERS)
    return (
        decode_kraft_version(control[m.KRAFT_VERSION]),
        None if voters is None else VoterSet.decode(voters),
    )


def test_format_standalone_writes_this_node_as_the_only_voter(tmp_path: Path) -> None:
    r = run("format", "-t", random_uuid(), "-c", str(dynamic_config(tmp_path)), "--standalone")
    assert r.returncode == 0, r.stderr
    assert "Formatting dynamic metadata voter directory" in r.stdout
    meta = read_meta_properties(tmp_path / "logs")
    assert meta.directory_id is not None
    version, voters = bootstrap_voters(tmp_path)
    assert version == 1 and voters is not None
    (me,) = voters.voters
    assert me.voter_id == 1 and me.directory_id.bytes == parse_uuid(meta.directory_id)
    assert [(e.name, e.host, e.port) for e in me.endpoints] == [("CONTROLLER", "localhost", 9093)]


def test_format_initial_controllers(tmp_path: Path) -> None:
    dirs = [random_uuid() for _ in range(3)]
    initial = ",".join(f"{i + 1}@h{i + 1}:{9093 + i}:{d}" for i, d in enumerate(dirs))
    cfg = dynamic_config(tmp_path, node_id=2)
    r = run("format", "-t", random_uuid(), "-c", str(cfg), "--initial-controllers", initial)
    assert r.returncode == 0, r.stderr
    assert read_meta_properties(tmp_path / "logs").directory_id == dirs[1]  # the one given
    version, voters = bootstrap_voters(tmp_path)
    assert version == 1 and voters is not None
    assert [(v.voter_id, v.endpoints[0].host, v.endpoints[0].port) for v in voters.voters] == [
        (1, "h1", 9093),
        (2, "h2", 9094),
        (3, "h3", 9095),
    ]


def test_format_no_initial_controllers(tmp_path: Path) -> None:
    cfg = dynamic_config(tmp_path)
    r = run("format", "-t", random_uuid(), "-c", str(cfg), "--no-initial-controllers")
    assert r.returncode == 0, r.stderr
    assert bootstrap_voters(tmp_path) == (1, None)


def test_format_dynamic_errors(tmp_path: Path) -> None:
    cfg = dynamic_config(tmp_path)
    cid = random_uuid()
    r = run("format", "-t", cid, "-c", str(cfg))
    assert r.returncode == 1
    assert r.stderr == (
        "Because controller.quorum.voters is not set on this controller, you must specify one "
        "of the following: --standalone, --initial-controllers, or --no-initial-controllers.\n"
    )
    r = run("format", "-t", cid, "-c", str(cfg), "--standalone", "--no-initial-controllers")
    assert r.returncode == 1
    assert "not allowed with argument --standalone/-s" in r.stderr
    for bad, message in [
        ("1@h:9093", "No colon following port could be found."),
        ("x@h:9093:AAAAAAAAAAAAAAAAAAAAAQ", "Failed to parse node id in dynamic voter string."),
        ("1@h:9093:nope", "Failed to parse directory ID in dynamic voter string."),
        (
            "1@h:9093:AAAAAAAAAAAAAAAAAAAAAQ,1@h:9094:AAAAAAAAAAAAAAAAAAAAAg",
            "Node id 1 was specified more than once.",
        ),
    ]:
        r = run("format", "-t", cid, "-c", str(cfg), "--initial-controllers", bad)
        assert r.returncode == 1 and r.stderr == message + "\n", (bad, r.stderr)
    assert not (tmp_path / "logs").exists()
