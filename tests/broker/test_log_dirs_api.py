"""DescribeLogDirs / AlterReplicaLogDirs handlers over a real LogManager with two dirs: a dir
that cannot be used is KAFKA_STORAGE_ERROR in both (as root, only a missing dir can be made
unusable), a move in progress shows its future replica, requested partitions filter."""

import asyncio
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.log_dirs import LogDirsApi
from broker.api.services import Services
from broker.log import LogManager, ManualClock
from broker.metadata.image import MetadataImage, PartitionImage, TopicImage
from protocol.build import build
from protocol.registry import REGISTRY

from .log_helpers import T0, batch, small_config


@dataclass
class Ctx:
    api_version: int
    principal: str = "User:ANONYMOUS"
    peer_host: str = "127.0.0.1"


@dataclass
class Hosted:
    log: Any


class Replicas:
    def __init__(self, logs: LogManager) -> None:
        self.logs = logs

    def get(self, topic: str, partition: int) -> Hosted | None:
        plog = self.logs.get(topic, partition)
        return None if plog is None else Hosted(plog)


def setup(tmp: Path) -> tuple[LogDirsApi, LogManager, Path, Path]:
    a, b = tmp / "a", tmp / "b"
    logs = LogManager([a, b], small_config(), ManualClock(T0))
    topic_id = uuid.uuid4()
    for p, d in ((0, a), (1, b)):
        logs.prefer_dir("t", p, d)
        plog = logs.get_or_create("t", p, topic_id)
        for i in range(20):
            plog.append_as_leader(batch(3, tag=i), 0, now_ms=T0)
        plog.high_watermark = plog.log_end_offset
    parts = {p: PartitionImage(p, (1,), (1,), 1, 0, 0) for p in (0, 1, 2)}
    img = MetadataImage(
        topics=MappingProxyType({"t": TopicImage("t", topic_id, MappingProxyType(parts))})
    )
    services = Services(
        node_id=1,
        cluster_id="c",
        image=lambda: img,
        controller=None,
        replicas=Replicas(logs),
        log_manager=logs,
        config=None,
        now_ms=lambda: T0,
    )
    return LogDirsApi(services), logs, a, b


def describe(api: LogDirsApi, topics: Any = None) -> dict[str, Any]:
    req = build(REGISTRY.spec(35).request_type(4), {"topics": topics})
    resp = asyncio.run(api.describe_log_dirs(Ctx(4), req))  # type: ignore[arg-type]
    assert resp.error_code == ErrorCode.none
    return {
        r.log_dir: (
            r.error_code,
            sorted((p.partition_index, p.is_future_key) for t in r.topics for p in t.partitions),
            r.total_bytes > 0,
        )
        for r in resp.results
    }


def alter(api: LogDirsApi, path: str, partitions: list[int]) -> list[tuple[int, ErrorCode]]:
    req = build(
        REGISTRY.spec(34).request_type(2),
        {"dirs": [{"path": path, "topics": [{"name": "t", "partitions": partitions}]}]},
    )
    resp = asyncio.run(api.alter_replica_log_dirs(Ctx(2), req))  # type: ignore[arg-type]
    return [(p.partition_index, p.error_code) for t in resp.results for p in t.partitions]


def test_describe_every_dir_and_filter(tmp_path: Path) -> None:
    api, logs, a, b = setup(tmp_path)
    try:
        assert describe(api) == {
            str(a): (ErrorCode.none, [(0, False)], True),
            str(b): (ErrorCode.none, [(1, False)], True),
        }
        only = describe(api, [{"topic": "t", "partitions": [1]}])
        assert only == {
            str(a): (ErrorCode.none, [], True),
            str(b): (ErrorCode.none, [(1, False)], True),
        }
    finally:
        logs.close()


def test_an_unusable_dir_is_a_storage_error(tmp_path: Path) -> None:
    api, logs, a, b = setup(tmp_path)
    try:
        shutil.rmtree(b)
        got = describe(api)
        assert got[str(b)] == (ErrorCode.kafka_storage_error, [], False)
        assert got[str(a)][0] == ErrorCode.none
        assert alter(api, str(b), [0]) == [(0, ErrorCode.kafka_storage_error)]
        b.mkdir()
    finally:
        logs.close()


def test_alter_errors_and_a_move_seen_in_describe(tmp_path: Path) -> None:
    api, logs, a, b = setup(tmp_path)
    try:
        assert alter(api, str(tmp_path / "c"), [0]) == [(0, ErrorCode.log_dir_not_found)]
        assert alter(api, str(b), [1, 2, 3]) == [
            (1, ErrorCode.none),  # already there
            (2, ErrorCode.replica_not_available),  # known, not hosted: created in b later
            (3, ErrorCode.unknown_topic_or_partition),
        ]
        assert logs.moves.moves() == []

        async def move() -> dict[str, Any]:
            req = build(
                REGISTRY.spec(34).request_type(2),
                {"dirs": [{"path": str(b), "topics": [{"name": "t", "partitions": [0]}]}]},
            )
            resp = await api.alter_replica_log_dirs(Ctx(2), req)  # type: ignore[arg-type]
            assert [p.error_code for t in resp.results for p in t.partitions] == [ErrorCode.none]
            req = build(REGISTRY.spec(35).request_type(4), {"topics": None})
            during = await api.describe_log_dirs(Ctx(4), req)  # type: ignore[arg-type]
            move = logs.moves.get("t", 0)
            assert move is not None and move.task is not None
            await asyncio.wait_for(move.task, 10)
            return {
                r.log_dir: sorted(
                    (p.partition_index, p.is_future_key, p.offset_lag)
                    for t in r.topics
                    for p in t.partitions
                )
                for r in during.results
            }

        during = asyncio.run(move())
        end = logs.get("t", 0).log_end_offset  # type: ignore[union-attr]
        assert during == {str(a): [(0, False, 0)], str(b): [(0, True, end), (1, False, 0)]}
        assert describe(api)[str(b)][1] == [(0, False), (1, False)]
        assert logs.get_or_create("t", 2, None).dir.parent == b
    finally:
        logs.close()
