"""--describe of a paused mirror keeps the last known source offset and lag, and says how old
they are (they are not live while nothing is fetched)."""

from __future__ import annotations

import re
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
        _age_s(row[7])  # SOURCE-AGE: how old those numbers are
        text = mirror_tool(dst, "--describe", "--mirror", "m")
        assert "orders-0 PAUSED: not fetched while paused: source offset 30 as of" in text, text


def _age_s(cell: str) -> int:
    """SOURCE-AGE (``7s``, ``1m5s``) in seconds."""
    m = re.fullmatch(r"(?:(\d+)m)?(\d+)s", cell)
    assert m is not None, cell
    return int(m.group(1) or 0) * 60 + int(m.group(2))


def test_source_down_then_paused(tmp_path: Path) -> None:
    """With the source gone, --describe keeps the last known source offset, says how old it is
    (SourceOffsetAgeMs, growing), shows the lag as unknown (``?``) and why (the connection);
    paused, it shows the last known numbers again, still aged."""
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst", node_id=4, mirror__metadata__refresh__interval__ms="500")
    with running(src, dst):
        create_topic(src.bootstrap, "orders", 1)
        ck_produce(src.bootstrap, "orders", make_records("orders", 30, 1))
        props = write_mirror_config(tmp_path / "m.properties", src.bootstrap)
        create_mirror(dst, "m", props, "orders")
        wait_for(
            lambda: (
                [r[3:7] for r in describe_rows(dst, "m", "orders")]
                == [["30", "30", "0", "MIRRORING"]]
            ),
            30,
            "caught up",
        )
        (row,) = describe_rows(dst, "m", "orders")
        assert len(row) == 8 and _age_s(row[7]) <= 3, row  # a healthy fetcher: current

        src.kill()
        wait_for(
            lambda: [r[5] for r in describe_rows(dst, "m", "orders")] == ["?"],
            30,
            "the lag to be unknown",
        )
        (row,) = describe_rows(dst, "m", "orders")
        assert row[3:7] == ["30", "30", "?", "MIRRORING"], row
        first = _age_s(row[7])
        text = mirror_tool(dst, "--describe", "--mirror", "m")
        (note,) = [line for line in text.splitlines() if line.startswith("orders-0 MIRRORING: ")]
        assert "source offset not current: fetching from the source fails" in note, text
        assert "connect" in note.lower(), note
        wait_for(
            lambda: _age_s(describe_rows(dst, "m", "orders")[0][7]) >= first + 2,
            30,
            "the age to grow",
        )

        mirror_tool(dst, "--pause", "--topic", "orders", "--mirror", "m")
        wait_for(
            lambda: [r[6] for r in describe_rows(dst, "m", "orders")] == ["PAUSED"],
            30,
            "paused",
        )
        (row,) = describe_rows(dst, "m", "orders")
        assert row[3:7] == ["30", "30", "0", "PAUSED"], row  # the last known numbers
        assert _age_s(row[7]) >= first + 2, row
