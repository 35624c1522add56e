"""noida-db (PyPI ``noida-db``, an independent Kafka-protocol server) as a mirror source.

noida runs as its own process on a free loopback port (killed by PID at the end); a stock
confluent-kafka producer writes to it (lz4, idempotent); a kmirror destination mirrors the topic
with ``kafka-mirrors.sh``, and stock consumers read the same records at the same offsets from
both. noida's quirks as a source (no topic ids in Metadata: fetched by name) are handled by the
mirror and logged.
"""

import platform
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from .clients import (
    CODEC_IDS,
    Rec,
    ck_produce,
    ck_read_all,
    create_topic,
    make_records,
    stored_codecs,
    wait_for,
)
from .mirror_helpers import create_mirror, describe_rows, write_mirror_config
from .node import Node, free_port

TOPIC = "orders"
PARTITIONS = 2


def _noida_binary() -> Path:
    """The server binary inside the wheel (the ``noida-db`` script is a wrapper that would leave
    it running if only the wrapper were killed)."""
    try:
        path = Path(str(resources.files("noida_db").joinpath("noida-db")))
    except ModuleNotFoundError:
        if (sys.platform, platform.machine()) != ("linux", "x86_64"):
            pytest.skip("noida-db ships for x86-64 Linux only")
        path = Path("/nonexistent")
    assert path.is_file(), "noida-db is not installed (bin/setup.sh installs the test extras)"
    if not path.stat().st_mode & 0o111:
        path.chmod(0o755)
    return path


@pytest.fixture()
def noida(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    out = (tmp_path / "noida.out").open("wb")
    proc = subprocess.Popen(
        [
            str(_noida_binary()),
            "start",
            "--only",
            "kafka",
            "--kafka-port",
            str(port),
            "--host",
            "127.0.0.1",
            "--data-dir",
            str(tmp_path / "noida"),
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:

        def listening() -> bool:
            assert proc.poll() is None, (tmp_path / "noida.out").read_text(errors="replace")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return True
            except OSError:
                return False

        wait_for(listening, 20, "noida-db to listen")
        yield f"127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.kill()  # our child, by PID
        proc.wait(10)
        out.close()


def _read(bootstrap: str, n: int) -> list[Rec]:
    recs = ck_read_all(bootstrap, TOPIC, PARTITIONS, n)
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def _produce(bootstrap: str, recs: list[Rec]) -> None:
    errors = ck_produce(
        bootstrap,
        TOPIC,
        recs,
        **{"compression.type": "lz4", "enable.idempotence": True, "batch.size": 4096},
    )
    assert not errors, errors


def test_noida_db_as_a_mirror_source(noida: str, tmp_path: Path) -> None:
    create_topic(noida, TOPIC, PARTITIONS)
    first = make_records("a", 200, PARTITIONS)
    _produce(noida, first)
    source = _read(noida, len(first))
    assert len(source) == len(first)

    dst = Node(tmp_path / "dst", mirror__metadata__refresh__interval__ms="500")
    dst.start()
    try:
        create_mirror(dst, "nm", write_mirror_config(tmp_path / "mirror.properties", noida), TOPIC)
        wait_for(lambda: _read(dst.bootstrap, len(source)) == source, 30, "the mirrored copy")

        # it keeps following the source
        second = make_records("b", 100, PARTITIONS)
        _produce(noida, second)
        source = _read(noida, len(first) + len(second))
        assert len(source) == len(first) + len(second)
        wait_for(lambda: _read(dst.bootstrap, len(source)) == source, 30, "the second round")
        # same offsets (Rec compares partition, offset, key, value, headers, timestamp)
        assert [(r.partition, r.offset) for r in _read(dst.bootstrap, len(source))] == [
            (r.partition, r.offset) for r in source
        ]

        def caught_up() -> bool:
            rows = describe_rows(dst, "nm", TOPIC)
            return len(rows) == PARTITIONS and all(
                r[3] == r[4] and r[5] == "0" and r[6] == "MIRRORING" for r in rows
            )

        wait_for(caught_up, 15, "describe: lag 0, MIRRORING", step=0.2)
        log = (dst.workdir / "node.out").read_text(errors="replace")
        assert "Traceback" not in log and " ERROR " not in log, dst.log_tail(60)
        # the producer's lz4 batches, kept by noida and by the mirror as they were
        assert stored_codecs(dst.log_dir, TOPIC) == {CODEC_IDS["lz4"]}
    finally:
        dst.kill()
