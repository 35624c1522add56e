"""Leader and ISR changes when a broker leaves or rejoins service (Kafka's PartitionChangeBuilder,
as ReplicationControlManager.generateLeaderAndIsrUpdates uses it, without ELR or reassignments).

For each partition the target ISR is the ISR without the broker leaving. The current leader stays
when it is still in that ISR and acceptable; otherwise the first replica (in assignment order) in
the target ISR that is acceptable leads; otherwise nobody (leader -1). Acceptable means active
(registered, unfenced, not in controlled shutdown), except that the broker leaving never is and
the broker rejoining always is (its unfencing is in the same batch, not yet in the image).

As Kafka without eligible leader replicas: an ISR is never emptied, so the last member stays in
it (a partition of one replica keeps ``isr=[b]`` with no leader, and its broker is elected again
when it comes back). Only a leader change bumps the leader epoch (metadata.version 3.6+): the
record then names the leader, and the image starts a new epoch for any leader it names.

Unclean election (``unclean.leader.election.enable``, Kafka's Election.UNCLEAN): when no member
of the target ISR can lead, the first acceptable replica in assignment order does, and the ISR
becomes just that leader (what it has is now the partition's history: acked records may be
lost, which is why it is off by default). Kafka also marks such a leader RECOVERING
(LeaderRecoveryState); the image here does not track that state, so the record leaves it alone.
"""

import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from protocol.metadata_records import latest_type

from ..metadata.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    PartitionImage,
    TopicImage,
)

log = logging.getLogger(__name__)

PartitionChangeRecord = latest_type("PartitionChangeRecord")

NO_LEADER: Final = -1
NO_CHANGE: Final = -2  # PartitionChangeRecord.leader when the leader stays
UNCLEAN_LEADER_ELECTION: Final = "unclean.leader.election.enable"
MIRROR_UNCLEAN_SUPPORT: Final = "mirror.support.unclean.leader.election"
MIRROR_NAME: Final = "mirror.name"


def warn_unclean_mirror(img: MetadataImage, topic: str, partition: int, leader: int) -> None:
    """KIP-1279: unclean leader election of a mirror partition is unsupported unless the topic
    sets mirror.support.unclean.leader.election (then PREPARING waits for every replica): say
    so loudly, since the new leader's log may differ from the source's without detection."""
    configs = img.config(TOPIC_RESOURCE, topic)
    if not configs.get(MIRROR_NAME):
        return
    if configs.get(MIRROR_UNCLEAN_SUPPORT, "false").strip().lower() == "true":
        return
    log.warning(
        "unclean leader election of mirror partition %s-%d (broker %d leads from outside the "
        "ISR): Cluster Mirroring does not support this without %s=true; the partition's "
        "records may now differ from the source's without being detected",
        topic,
        partition,
        leader,
        MIRROR_UNCLEAN_SUPPORT,
    )


@dataclass(frozen=True, slots=True)
class UncleanElection:
    """Whether a topic allows unclean leader election, as Kafka's controller resolves it: the
    topic's config, else this controller node's dynamic broker config, else the cluster-wide
    dynamic default, else the static ``unclean.leader.election.enable`` (false by default)."""

    static_default: bool = False
    node_id: int | None = None

    def enabled(self, img: MetadataImage, topic: str) -> bool:
        scopes = [img.config(TOPIC_RESOURCE, topic)]
        if self.node_id is not None:
            scopes.append(img.config(BROKER_RESOURCE, str(self.node_id)))
        scopes.append(img.config(BROKER_RESOURCE, ""))
        for configs in scopes:
            value = configs.get(UNCLEAN_LEADER_ELECTION)
            if value is not None:
                return value.strip().lower() == "true"  # as Java's Boolean.parseBoolean
        return self.static_default


CLEAN_ONLY: Final = UncleanElection()


def is_active(img: MetadataImage, broker_id: int) -> bool:
    """Can lead: registered, unfenced and not in controlled shutdown (Kafka's isActive)."""
    b = img.brokers.get(broker_id)
    return b is not None and not b.fenced and not b.in_controlled_shutdown


def partitions_with(
    img: MetadataImage, broker_id: int
) -> Iterator[tuple[TopicImage, PartitionImage]]:
    """Partitions whose ISR holds ``broker_id`` or that it leads."""
    for t in img.topics.values():
        for p in t.partitions.values():
            if broker_id in p.isr or p.leader == broker_id:
                yield t, p


def leaderless(img: MetadataImage) -> Iterator[tuple[TopicImage, PartitionImage]]:
    for t in img.topics.values():
        for p in t.partitions.values():
            if p.leader == NO_LEADER:
                yield t, p


def leads_any(img: MetadataImage, broker_id: int) -> bool:
    return any(p.leader == broker_id for t in img.topics.values() for p in t.partitions.values())


def leader_and_isr_changes(
    img: MetadataImage,
    partitions: Iterable[tuple[TopicImage, PartitionImage]],
    *,
    remove: int = NO_LEADER,
    add: int = NO_LEADER,
    unclean: UncleanElection = CLEAN_ONLY,
) -> list[Any]:
    """PartitionChangeRecords taking ``remove`` out of ISRs and leadership and/or letting ``add``
    lead; partitions that would not change get no record. ``unclean`` says which topics may
    elect a leader from outside the ISR when no ISR member can lead."""

    def acceptable(r: int) -> bool:
        return r != remove and (r == add or is_active(img, r))

    records = []
    for t, p in partitions:
        rec = _change(t, p, remove, acceptable, functools.partial(unclean.enabled, img, t.name))
        if rec is not None:
            records.append(rec)
            if rec.leader >= 0 and rec.leader not in p.isr:
                warn_unclean_mirror(img, t.name, p.partition, rec.leader)
    return records


def _change(
    t: TopicImage,
    p: PartitionImage,
    remove: int,
    acceptable: Callable[[int], bool],
    unclean_allowed: Callable[[], bool],
) -> Any | None:
    target_isr = tuple(r for r in p.isr if r != remove)

    def valid(r: int) -> bool:
        return r in target_isr and acceptable(r)

    # the leader stays while it may; else the first eligible replica in assignment order
    leader = p.leader if valid(p.leader) else next((r for r in p.replicas if valid(r)), NO_LEADER)
    isr = target_isr if target_isr and target_isr != p.isr else None
    if leader == NO_LEADER and unclean_allowed():
        out_of_isr = next((r for r in p.replicas if acceptable(r)), NO_LEADER)
        if out_of_isr != NO_LEADER:
            log.info(
                "unclean election: %d leads %s-%d, which had no in-sync replica to lead it",
                out_of_isr,
                t.name,
                p.partition,
            )
            leader = out_of_isr
            isr = (out_of_isr,) if (out_of_isr,) != p.isr else None
    if leader == p.leader and isr is None:
        return None
    return PartitionChangeRecord(
        partition_id=p.partition,
        topic_id=t.topic_id,
        isr=isr,
        leader=leader if leader != p.leader else NO_CHANGE,
    )
