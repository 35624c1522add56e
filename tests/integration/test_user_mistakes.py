"""Mistakes an operator makes easily must not lose acknowledged data (issue 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .clients import ck_produce, ck_read_all, create_topic, make_records, wait_for
from .mirror_helpers import (
    create_mirror,
    describe_rows,
    mirror_tool,
    run_mirror_tool,
    running,
    write_mirror_config,
)
from .node import Node, free_port


def test_a_second_node_on_the_same_log_dir_refuses_to_start(tmp_path: Path) -> None:
    first = Node(tmp_path / "first")
    first.start()
    try:
        create_topic(first.bootstrap, "orders", 1)
        recs = make_records("orders", 50, 1)
        ck_produce(first.bootstrap, "orders", recs)
        # the obvious copy of the config: other ports, same log.dirs
        second = Node(tmp_path / "second", log__dirs=str(first.log_dir))
        second.write_config()
        second._formatted = True  # the directory already is
        with pytest.raises(RuntimeError) as info:
            second.start(timeout=30)
        text = str(info.value)
        assert "node exited with 1" in text
        assert f"{first.log_dir} is in use by another process (pid {first.proc.pid}" in text  # type: ignore[union-attr]
        assert "Traceback" not in text
        got = ck_read_all(first.bootstrap, "orders", 1, len(recs))
        assert [r.value for r in got] == [r.value for r in recs]
    finally:
        first.kill()


def _read_values(bootstrap: str, topic: str, partitions: int, n: int) -> list[bytes | None]:
    got = ck_read_all(bootstrap, topic, partitions, n)
    return [r.value for r in sorted(got, key=lambda r: (r.partition, r.offset))]


def test_a_mirror_whose_source_is_this_cluster_is_refused(tmp_path: Path) -> None:
    dst = Node(tmp_path / "dst", mirror__metadata__refresh__interval__ms="500")
    with running(dst):
        create_topic(dst.bootstrap, "orders", 2)
        recs = make_records("orders", 40, 2)
        ck_produce(dst.bootstrap, "orders", recs)
        before = _read_values(dst.bootstrap, "orders", 2, len(recs))

        # 1. at --create: the source answers with our own cluster id
        itself = write_mirror_config(tmp_path / "self.properties", dst.bootstrap)
        rc, out, err = run_mirror_tool(
            dst, "--create", "--mirror", "self", "--mirror-config", str(itself)
        )
        assert rc == 1, (out, err)
        assert f"is this cluster (cluster id {dst.cluster_id})" in err
        assert "self" not in mirror_tool(dst, "--list")

        # 2. created while its source was down, the topic added, then pointed at ourselves:
        # the partitions fail instead of truncating, and --describe says why
        down = write_mirror_config(tmp_path / "down.properties", f"127.0.0.1:{free_port()}")
        mirror_tool(dst, "--create", "--mirror", "later", "--mirror-config", str(down))
        mirror_tool(dst, "--add", "--topic", "orders", "--mirror", "later")
        mirror_tool(dst, "--alter", "--mirror", "later", "--mirror-config", str(itself))

        def failed() -> bool:
            rows = describe_rows(dst, "later", "orders")
            return len(rows) == 2 and all(r[6] == "FAILED" for r in rows)

        wait_for(failed, 30, "both partitions FAILED")
        text = mirror_tool(dst, "--describe", "--mirror", "later")
        assert text.count("is this cluster") == 2, text
        assert _read_values(dst.bootstrap, "orders", 2, len(recs)) == before
        # 3. --add against it is refused outright
        mirror_tool(dst, "--remove", "--topic", "orders", "--mirror", "later")
        rc, out, err = run_mirror_tool(dst, "--add", "--topic", "orders", "--mirror", "later")
        assert rc == 1 and "is this cluster" in err, (out, err)
        assert _read_values(dst.bootstrap, "orders", 2, len(recs)) == before


def test_the_source_cluster_id_is_recorded_and_checked_on_reconnect(tmp_path: Path) -> None:
    src = Node(tmp_path / "src")
    other = Node(tmp_path / "other")
    dst = Node(tmp_path / "dst", node_id=4, mirror__metadata__refresh__interval__ms="500")
    with running(src, other, dst):
        create_topic(src.bootstrap, "orders", 1)
        ck_produce(src.bootstrap, "orders", make_records("orders", 20, 1))
        create_mirror(
            dst, "m", write_mirror_config(tmp_path / "m.properties", src.bootstrap), "orders"
        )
        wait_for(
            lambda: (
                [(r[4], r[6]) for r in describe_rows(dst, "m", "orders")] == [("20", "MIRRORING")]
            ),
            30,
            "the 20 records mirrored",
        )
        # recorded in the metadata log: still known after a restart, with the source down
        src.kill()
        assert dst.stop() == 0
        dst.start()
        assert src.cluster_id in mirror_tool(dst, "--list")
        # another cluster behind the mirror's bootstrap.servers is refused
        create_topic(other.bootstrap, "orders", 1)
        swapped = write_mirror_config(tmp_path / "other.properties", other.bootstrap)
        mirror_tool(dst, "--alter", "--mirror", "m", "--mirror-config", str(swapped))
        wait_for(
            lambda: [r[6] for r in describe_rows(dst, "m", "orders")] == ["FAILED"],
            30,
            "FAILED after the swap",
        )
        text = mirror_tool(dst, "--describe", "--mirror", "m")
        assert f"is cluster {other.cluster_id}, but the mirror was created against" in text
        assert _read_values(dst.bootstrap, "orders", 1, 20) == [
            r.value for r in make_records("orders", 20, 1)
        ]
