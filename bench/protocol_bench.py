"""Hot-path codec throughput: our hand-written encoders/parser against kio's generic ones.

Run with ``python -m bench.protocol_bench`` (or ``bench/run.sh``). Every case first checks that
both sides produce the same result, then runs each side for a fixed time budget and prints
operations per second and the speed-up.
"""

import argparse
import datetime
import io
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16 import response as fetch16
from kio.schema.fetch.v17 import response as fetch17
from kio.schema.metadata.v12 import response as meta12
from kio.schema.produce.v11 import request as produce11
from kio.schema.produce.v13 import request as produce13
from kio.serial import entity_reader, entity_writer

from protocol.encoders.fetch import encode_fetch_rows
from protocol.encoders.metadata import encode_metadata_response
from protocol.encoders.produce import parse_produce_request

MiB = 1 << 20


def _run(fn: Callable[[], object], budget: float) -> tuple[int, float]:
    count = 0
    start = time.perf_counter()
    deadline = start + budget
    now = start
    while now < deadline:
        fn()
        count += 1
        now = time.perf_counter()
    return count, now - start


def compare(
    ours: Callable[[], object], theirs: Callable[[], object], budget: float, rounds: int = 5
) -> tuple[float, float]:
    """Ops/s of both sides, run in alternating slices so machine noise hits them alike."""
    ours()  # warm caches (kio builds its writers lazily)
    theirs()
    totals = [0, 0.0, 0, 0.0]
    for _ in range(rounds):
        n, t = _run(ours, budget / rounds)
        totals[0] += n
        totals[1] += t
        n, t = _run(theirs, budget / rounds)
        totals[2] += n
        totals[3] += t
    return totals[0] / totals[1], totals[2] / totals[3]


def kio_write(cls: type[Any], obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, obj)
    return buf.getvalue()


# ---------------------------------------------------------------------------- cases


def produce_case(version: int) -> tuple[Callable[[], object], Callable[[], object]]:
    mod = produce13 if version == 13 else produce11
    topic_key: dict[str, Any] = (
        {"topic_id": uuid.UUID(int=42)} if version == 13 else {"name": "bench-topic"}
    )
    req = mod.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            mod.TopicProduceData(
                **topic_key,
                partition_data=(mod.PartitionProduceData(index=0, records=os.urandom(MiB)),),
            ),
        ),
    )
    raw = memoryview(kio_write(mod.ProduceRequest, req))
    reader = entity_reader(mod.ProduceRequest)
    view = parse_produce_request(raw, 0, version)
    kio_req, _ = reader(raw, 0)
    records = view.topics[0].partitions[0].records
    assert records is not None
    assert records.tobytes() == kio_req.topic_data[0].partition_data[0].records
    return (lambda: parse_produce_request(raw, 0, version)), (lambda: reader(raw, 0))


def fetch_request_case() -> tuple[Callable[[], object], Callable[[], object]]:
    """A consumer's Fetch v16: 3 topics x 10 partitions. Ours is bounds-checked; kio's native
    reader is faster per field but aborts the process on a forged array count."""
    from kio.schema.fetch.v16 import request as freq

    from protocol.encoders.fetch_request import parse_fetch_request

    req = freq.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        topics=tuple(
            freq.FetchTopic(
                topic_id=uuid.uuid4(),
                partitions=tuple(
                    freq.FetchPartition(partition=i, fetch_offset=1000 + i, partition_max_bytes=MiB)
                    for i in range(10)
                ),
            )
            for _ in range(3)
        ),
        forgotten_topics_data=(),
    )
    raw = memoryview(kio_write(freq.FetchRequest, req))
    reader = entity_reader(freq.FetchRequest)
    assert parse_fetch_request(raw, 0, 16).topics[2].partitions[9].fetch_offset == 1009
    return (lambda: parse_fetch_request(raw, 0, 16)), (lambda: reader(raw, 0))


def fetch_case(
    version: int, partitions: int, size: int
) -> tuple[Callable[[], object], Callable[[], object]]:
    mod = fetch17 if version == 17 else fetch16
    blob = os.urandom(size)
    resp = mod.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=12345,
        responses=(
            mod.FetchableTopicResponse(
                topic_id=uuid.UUID(int=7),
                partitions=tuple(
                    mod.PartitionData(
                        partition_index=i,
                        error_code=ErrorCode.none,
                        high_watermark=1_000_000 + i,
                        last_stable_offset=1_000_000 + i,
                        log_start_offset=0,
                        aborted_transactions=None,
                        records=blob,
                    )
                    for i in range(partitions)
                ),
            ),
        ),
    )
    # what FetchApi hands the encoder: rows, not kio objects
    topics = [
        {
            "topic_id": uuid.UUID(int=7),
            "partitions": [
                {
                    "partition_index": i,
                    "error_code": 0,
                    "high_watermark": 1_000_000 + i,
                    "last_stable_offset": 1_000_000 + i,
                    "log_start_offset": 0,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": blob,
                }
                for i in range(partitions)
            ],
        }
    ]
    ours = b"".join(encode_fetch_rows(0, 0, 12345, topics, version))
    assert ours == kio_write(mod.FetchResponse, resp)
    return (lambda: encode_fetch_rows(0, 0, 12345, topics, version)), (
        lambda: kio_write(mod.FetchResponse, resp)
    )


def metadata_case(
    topics: int, partitions: int
) -> tuple[Callable[[], object], Callable[[], object]]:
    m = meta12
    brokers = tuple(
        m.MetadataResponseBroker(
            node_id=i, host=f"broker-{i}.example.internal", port=9092, rack=None
        )
        for i in range(3)
    )
    topic_list = tuple(
        m.MetadataResponseTopic(
            error_code=ErrorCode.none,
            name=f"topic-{t:04d}",
            topic_id=uuid.UUID(int=t + 1),
            is_internal=False,
            partitions=tuple(
                m.MetadataResponsePartition(
                    error_code=ErrorCode.none,
                    partition_index=p,
                    leader_id=p % 3,
                    leader_epoch=5,
                    replica_nodes=(p % 3, (p + 1) % 3, (p + 2) % 3),
                    isr_nodes=(p % 3, (p + 1) % 3, (p + 2) % 3),
                    offline_replicas=(),
                )
                for p in range(partitions)
            ),
            topic_authorized_operations=-2147483648,
        )
        for t in range(topics)
    )
    resp = m.MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=brokers,
        cluster_id="kmirror-bench",
        controller_id=0,
        topics=topic_list,
    )
    assert encode_metadata_response(resp, 12) == kio_write(m.MetadataResponse, resp)
    return (lambda: encode_metadata_response(resp, 12)), (
        lambda: kio_write(m.MetadataResponse, resp)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", type=float, default=0.8, help="seconds per side per case")
    args = parser.parse_args()

    cases: list[tuple[str, Callable[[], tuple[Callable[[], object], Callable[[], object]]]]] = [
        ("produce request parse v11, 1 x 1 MiB", lambda: produce_case(11)),
        ("produce request parse v13, 1 x 1 MiB", lambda: produce_case(13)),
        ("fetch request parse v16, 3 x 10 partitions", fetch_request_case),
        ("fetch response encode v16, 16 x 64 KiB", lambda: fetch_case(16, 16, 64 * 1024)),
        ("fetch response encode v17, 1 x 1 MiB", lambda: fetch_case(17, 1, MiB)),
        ("metadata response encode v12, 100 x 10 x 3", lambda: metadata_case(100, 10)),
    ]
    header = f"{'case':<44} {'ours ops/s':>12} {'kio ops/s':>12} {'ratio':>8}"
    print(header)
    print("-" * len(header))
    for name, setup in cases:
        ours, theirs = setup()
        a, b = compare(ours, theirs, args.budget)
        print(f"{name:<44} {a:>12,.0f} {b:>12,.0f} {a / b:>7.1f}x", flush=True)


if __name__ == "__main__":
    main()
