"""ReplicaManager.append_txn_marker: the transaction coordinator's way to end a transaction on a
partition this node leads, with the errors it answers."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.log import LogConfig, LogManager, ManualClock
from broker.metadata.image import MetadataImage, apply_records
from broker.replication.replica_manager import MarkerAppend, ReplicaManager
from protocol.metadata_records import latest_type
from protocol.records import Record, build_batch

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
T0 = 1_700_000_000_000


def _replicas(tmp_path: Path, leader: int = 1, replicas: tuple[int, ...] = (1,)) -> ReplicaManager:
    clock = ManualClock(T0)
    rm = ReplicaManager(
        1, LogManager([tmp_path], LogConfig(), clock), lambda _t: LogConfig(), clock
    )
    tid = uuid.uuid4()
    image, delta = apply_records(
        MetadataImage(),
        list(
            enumerate(
                [
                    TopicRecord(name="t", topic_id=tid),
                    PartitionRecord(
                        partition_id=0,
                        topic_id=tid,
                        replicas=replicas,
                        isr=replicas,
                        leader=leader,
                        leader_epoch=3,
                        partition_epoch=0,
                    ),
                ],
                1,
            )
        ),
    )
    rm.apply_delta(image, delta)
    return rm


def test_marker_ends_the_transaction_and_moves_the_lso(tmp_path: Path) -> None:
    async def main() -> None:
        rm = _replicas(tmp_path)
        hosted = rm.get("t", 0)
        assert hosted is not None
        plog = hosted.log
        txn = build_batch(
            [Record(value=b"x")] * 2,
            producer_id=9,
            producer_epoch=1,
            base_sequence=0,
            is_transactional=True,
            base_timestamp=T0,
        )
        hosted.append_records(txn)
        assert plog.high_watermark == 2  # an ISR of one: committed at once
        assert plog.last_stable_offset == 0
        woke = asyncio.get_running_loop().create_future()
        hosted.add_waiter(woke)
        assert rm.append_txn_marker("t", 0, 9, 1, 4, commit=False) == MarkerAppend(
            ErrorCode.none, 2
        )
        await asyncio.wait_for(woke, 1)  # waiting fetches wake up
        assert plog.last_stable_offset == plog.high_watermark == 3
        assert plog.aborted_transactions(0, 3)[0][:3] == (9, 0, 2)
        assert plog.epoch_cache.latest_epoch == 3
        stale = rm.append_txn_marker("t", 0, 9, 0, 4, commit=True)
        assert stale.error == ErrorCode.invalid_producer_epoch and stale.offset == -1
        assert stale.message and "older than the last seen epoch" in stale.message
        zombie = rm.append_txn_marker("t", 0, 9, 1, 3, commit=True)
        assert zombie.error == ErrorCode.transaction_coordinator_fenced
        assert rm.append_txn_marker("u", 0, 9, 1, 4, commit=True).error == (
            ErrorCode.unknown_topic_or_partition
        )

    asyncio.run(main())


def test_only_the_leader_writes_markers(tmp_path: Path) -> None:
    rm = _replicas(tmp_path, leader=2, replicas=(1, 2))
    result = rm.append_txn_marker("t", 0, 9, 1, 4, commit=True)
    assert result == MarkerAppend(ErrorCode.not_leader_or_follower, -1)
