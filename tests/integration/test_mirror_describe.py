"""--describe of a paused mirror keeps the last known source offset and lag, and says how old
they are (they are not live while nothing is fetched); the lag of a source with a transaction
open runs to the source's last stable offset."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from confluent_kafka import Producer

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


def test_lag_of_a_source_with_an_open_transaction_runs_to_its_last_stable_offset(
    tmp_path: Path,
) -> None:
    """A READ_COMMITTED mirror copies up to the source's LSO: with a transaction open on the
    source it has copied all it can, so LAG is 0, and the records held behind the transaction
    show in a note and a gauge of their own, not as lag (issue 32). Once the transaction
    commits they are copied and the note goes."""
    src = Node(tmp_path / "src", transaction__state__log__replication__factor="1")
    dst = Node(tmp_path / "dst", node_id=4, mirror__metadata__refresh__interval__ms="500")
    with running(src, dst):
        create_topic(src.bootstrap, "orders", 1)
        ck_produce(src.bootstrap, "orders", make_records("orders", 10, 1))
        txn = Producer({"bootstrap.servers": src.bootstrap, "transactional.id": "held"})
        txn.init_transactions(30)
        txn.begin_transaction()
        for i in range(2):
            txn.produce("orders", value=b"open-%d" % i, partition=0)
        assert txn.flush(20) == 0
        props = write_mirror_config(tmp_path / "m.properties", src.bootstrap)
        create_mirror(dst, "m", props, "orders")
        # source HW 12, LSO 10: everything copyable is copied
        wait_for(
            lambda: (
                [(r[3], r[4], r[5], r[6]) for r in describe_rows(dst, "m", "orders")]
                == [("12", "10", "0", "MIRRORING")]
            ),
            30,
            "LAG 0 with the source transaction open",
        )
        text = mirror_tool(dst, "--describe", "--mirror", "m")
        assert "orders-0 MIRRORING: 2 record(s) held behind a transaction open on the source" in (
            text
        ), text
        metrics = _scrape(dst)
        assert 'kafka_server_mirror_consumer_lag{mirror="m",partition="0",topic="orders"} 0.0' in (
            metrics
        )
        assert (
            'kafka_server_mirror_source_open_transaction_records{mirror="m",partition="0",'
            'topic="orders"} 2.0' in metrics
        ), metrics
        txn.commit_transaction(30)
        wait_for(
            lambda: (
                [(r[3], r[4], r[5]) for r in describe_rows(dst, "m", "orders")]
                == [("13", "13", "0")]
            ),
            30,
            "the committed transaction copied",
        )
        assert "held behind" not in mirror_tool(dst, "--describe", "--mirror", "m")


def _scrape(node: Node) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10) as r:
        return str(r.read().decode())
