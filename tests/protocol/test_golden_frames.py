"""Our codec against request frames captured from stock clients (tests/golden/).

The frames were written by confluent-kafka (librdkafka), kafka-python and aiokafka
talking to ``tests/golden/capture.py``; ``index.json`` says what each frame is and what
records each produce scenario was asked to send.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from protocol.records import Compression, iter_records, scan_batches
from protocol.registry import decode_request

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
PRODUCE = 0

# (key, value, headers) with every header key as bytes.
RecordTuple = tuple[bytes | None, bytes | None, tuple[tuple[bytes, bytes | None], ...]]


@cache
def _index() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN / "index.json").read_text())
    return loaded


def _frames() -> dict[str, dict[str, Any]]:
    frames: dict[str, dict[str, Any]] = _index()["frames"]
    return frames


def _produce_scenarios() -> dict[str, dict[str, Any]]:
    return {name: sc for name, sc in _index()["scenarios"].items() if "records" in sc}


def _frame(rel: str) -> bytes:
    return (GOLDEN / rel).read_bytes()


def _hex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _produce_payloads(scenario: str) -> Iterator[tuple[int, bytes]]:
    """(partition, records bytes) of every Produce frame in a scenario, in send order."""
    client, name = scenario.split("/", 1)
    for rel, meta in sorted(_frames().items()):
        if meta["client"] != client or meta["scenario"] != name or meta["api_key"] != PRODUCE:
            continue
        for topic in decode_request(_frame(rel)).body.topic_data:
            for part in topic.partition_data:
                yield part.index, bytes(part.records)


def _expected(sc: dict[str, Any]) -> dict[int, list[RecordTuple]]:
    out: dict[int, list[RecordTuple]] = defaultdict(list)
    for r in sc["records"]:
        headers = tuple((k.encode(), _hex(v)) for k, v in r["headers"])
        out[r["partition"]].append((_hex(r["key"]), _hex(r["value"]), headers))
    return dict(out)


def test_index_and_files_agree() -> None:
    on_disk = {str(p.relative_to(GOLDEN)) for p in GOLDEN.glob("*/*.bin")}
    assert on_disk == set(_frames())
    assert {meta["client"] for meta in _frames().values()} == {
        "confluent_kafka",
        "kafka_python",
        "aiokafka",
    }
    codecs = {sc["compression"] for sc in _produce_scenarios().values()}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


@pytest.mark.parametrize("rel", sorted(_frames()))
def test_frame_decodes_with_matching_header(rel: str) -> None:
    meta = _frames()[rel]
    decoded = decode_request(_frame(rel))
    assert decoded.header.api_key == meta["api_key"]
    assert decoded.header.api_version == meta["api_version"]
    assert decoded.header.correlation_id == meta["correlation_id"]
    assert decoded.header.client_id == meta["client_id"]
    assert type(decoded.body).__name__.endswith("Request")
    if meta["api_key"] == PRODUCE:
        partitions = [p for t in decoded.body.topic_data for p in t.partition_data]
        assert partitions
        assert all(p.records for p in partitions)


@pytest.mark.parametrize("scenario", sorted(_produce_scenarios()))
def test_produced_batches_match_what_the_client_sent(scenario: str) -> None:
    sc = _produce_scenarios()[scenario]
    want_codec = Compression[sc["compression"].upper()]
    got: dict[int, list[RecordTuple]] = defaultdict(list)
    first_batch_seen: set[int] = set()
    batches = 0
    for partition, payload in _produce_payloads(scenario):
        for view in scan_batches(payload):
            batches += 1
            assert view.crc_ok()
            assert Compression(view.compression) is want_codec
            records = list(iter_records(view))
            assert len(records) == view.record_count
            # Clients send base offset 0, so offsets are the in-batch deltas.
            assert [r.offset for r in records] == list(range(len(records)))
            if sc["idempotent"]:
                assert view.producer_id >= 0
                if partition not in first_batch_seen:
                    assert view.base_sequence == 0
            first_batch_seen.add(partition)
            for r in records:
                headers = tuple((_as_bytes(k) or b"", _as_bytes(v)) for k, v in r.headers)
                got[partition].append((_as_bytes(r.key), _as_bytes(r.value), headers))
    assert batches > 0
    assert dict(got) == _expected(sc)


def test_idempotent_scenario_is_really_idempotent() -> None:
    scenario = "confluent_kafka/produce_idempotent"
    assert _produce_scenarios()[scenario]["idempotent"]
    views = [v for _, payload in _produce_payloads(scenario) for v in scan_batches(payload)]
    assert views
    assert views[0].producer_id >= 0
    assert views[0].base_sequence == 0


def _crc_rejected(buf: bytes) -> bool:
    try:
        return not all(view.crc_ok() for view in scan_batches(buf))
    except Exception:  # rejecting the corrupt batch outright is also acceptable
        return True


def test_corrupting_a_captured_batch_breaks_its_crc() -> None:
    _, payload = next(_produce_payloads("confluent_kafka/produce_zstd"))
    assert not _crc_rejected(payload)
    corrupt = bytearray(payload)
    corrupt[-1] ^= 0x01  # inside the CRC-covered compressed payload
    assert _crc_rejected(bytes(corrupt))
