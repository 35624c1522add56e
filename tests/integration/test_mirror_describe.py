"""--describe of a paused mirror keeps the last known source offset and lag, and says how old
they are (they are not live while nothing is fetched)."""

from __future__ import annotations

from pathlib import Path

from .clients import ck_produce, create_topic, make_records, wait_for
from .mirror_helpers import (
    create_mirror,
    describe_rows,
    mirror_tool,
    running,
    write_mirror_config,
)
from .node import Node


def test_a_paused_partition_shows_its_last_known_numbers_and_their_age(tmp_path: Path) -> None:
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst", node_id=4, mirror__metadata__refresh__interval__ms="500")
    with running(src, dst):
        create_topic(src.bootstrap, "orders", 1)
        ck_produce(src.bootstrap, "orders", make_records("orders", 30, 1))
        props = write_mirror_config(tmp_path / "m.properties", src.bootstrap)
        create_mirror(dst, "m", props, "orders")
        wait_for(
            lambda: (
                [(r[3], r[4], r[6]) for r in describe_rows(dst, "m", "orders")]
                == [("30", "30", "MIRRORING")]
            ),
            30,
            "caught up",
        )
        mirror_tool(dst, "--pause", "--topic", "orders", "--mirror", "m")
        wait_for(
            lambda: [r[6] for r in describe_rows(dst, "m", "orders")] == ["PAUSED"],
            30,
            "paused",
        )
        (row,) = describe_rows(dst, "m", "orders")
        assert (row[3], row[4], row[5]) == ("30", "30", "0")  # not "-"
        text = mirror_tool(dst, "--describe", "--mirror", "m")
        assert "orders-0 PAUSED: not fetched while paused: source offset 30 as of" in text, text
