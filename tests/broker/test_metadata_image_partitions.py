"""Partition records applied in one batch: each topic's partitions are copied once per batch
(not per record), and the image the batch started from never changes."""

import uuid

from broker.metadata.image import MetadataImage, apply_records
from protocol.metadata_records import latest_type

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
PartitionChangeRecord = latest_type("PartitionChangeRecord")


def _topic(partitions: int) -> tuple[MetadataImage, uuid.UUID]:
    tid = uuid.uuid4()
    records = [TopicRecord(name="t", topic_id=tid)] + [
        PartitionRecord(
            partition_id=p,
            topic_id=tid,
            replicas=(1, 2),
            isr=(1, 2),
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        )
        for p in range(partitions)
    ]
    image, _ = apply_records(MetadataImage(), list(enumerate(records, 1)))
    return image, tid


def test_a_batch_changing_every_partition_leaves_the_base_image_alone() -> None:
    base, tid = _topic(300)
    assert len(base.topics["t"].partitions) == 300
    bumps = [PartitionChangeRecord(partition_id=p, topic_id=tid, leader=1) for p in range(300)]
    moved = [PartitionChangeRecord(partition_id=7, topic_id=tid, leader=2)]
    after, delta = apply_records(base, list(enumerate(bumps + moved, base.offset + 1)))
    parts = after.topics["t"].partitions
    assert {p.leader_epoch for i, p in parts.items() if i != 7} == {1}
    assert parts[7].leader == 2 and parts[7].leader_epoch == 2
    assert {p.leader_epoch for p in base.topics["t"].partitions.values()} == {0}
    assert base.topics["t"].partitions[7].leader == 1
    assert len(set(delta.changed_partitions)) == 300
    # the next batch copies again: the image just built does not change under it either
    again, _ = apply_records(
        after, [(after.offset + 1, PartitionChangeRecord(partition_id=0, topic_id=tid, leader=2))]
    )
    assert again.topics["t"].partitions[0].leader == 2
    assert after.topics["t"].partitions[0].leader == 1


def test_a_topic_recreated_in_the_batch_gets_its_own_partitions() -> None:
    base, tid = _topic(2)
    new_id = uuid.uuid4()
    records = [
        PartitionChangeRecord(partition_id=0, topic_id=tid, leader=2),
        TopicRecord(name="t", topic_id=new_id),
        PartitionRecord(
            partition_id=0,
            topic_id=new_id,
            replicas=(3,),
            isr=(3,),
            leader=3,
            leader_epoch=0,
            partition_epoch=0,
        ),
    ]
    after, _ = apply_records(base, list(enumerate(records, base.offset + 1)))
    assert dict(after.topics["t"].partitions).keys() == {0}
    assert after.topics["t"].partitions[0].leader == 3
