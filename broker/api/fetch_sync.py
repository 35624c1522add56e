"""Synchronous mirroring, the Fetch side (docs/protocol.md, "Synchronous mirroring"): a kmirror
mirror's consumer Fetch names the mirror (tag 1279) and, per partition, what its destination
committed; for the partitions of ``mirror.sync.enable`` topics this node leads, that goes to
`broker.mirror.sync_acks.SyncAcks`, which wakes the acks=all produces waiting for it. Every
Fetch of the session counts (an incremental one repeats the last values it sent), so a mirror
that keeps fetching stays known while idle."""

from collections.abc import Mapping
from typing import Any

from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..mirror.core.sync_acks_state import SyncPolicy, policy_of
from ..mirror.sync_acks import SyncAcks
from .fetch_sessions import SessionPartition
from .services import Services


def _topic_name(img: MetadataImage, tkey: Any, by_id: bool) -> str | None:
    topic = img.topic_by_id(tkey) if by_id else img.topics.get(tkey)
    return None if topic is None else str(topic.name)


def report_commits(
    s: Services,
    sync: SyncAcks,
    mirror: str,
    wanted: Mapping[tuple[Any, int], SessionPartition],
    by_id: bool,
) -> None:
    img = s.image()
    policies: dict[Any, tuple[str, SyncPolicy] | None] = {}
    for (tkey, partition), sp in wanted.items():
        if sp.mirror_committed < 0:
            continue
        if tkey not in policies:
            name = _topic_name(img, tkey, by_id)
            policy = None if name is None else policy_of(img.config(TOPIC_RESOURCE, name))
            policies[tkey] = None if name is None or policy is None else (name, policy)
        found = policies[tkey]
        if found is None:
            continue  # not a sync topic: nothing waits for this mirror
        hosted = s.replicas.get(found[0], partition)
        if hosted is None or not hosted.is_leader:
            continue
        sync.report(
            found[0], partition, mirror, sp.mirror_committed, hosted.leader.high_watermark, found[1]
        )


def note_foreign_mirror(
    s: Services,
    sync: SyncAcks,
    client_id: str,
    wanted: Mapping[tuple[Any, int], SessionPartition],
    by_id: bool,
) -> None:
    """A Fetch without the signal from a client whose id is a KIP-1279 mirror fetcher's: the
    sync topics it reads cannot wait for it (`SyncAcks.note_foreign` logs it once)."""
    img = s.image()
    for tkey in {k for k, _p in wanted}:
        name = _topic_name(img, tkey, by_id)
        if name is not None and policy_of(img.config(TOPIC_RESOURCE, name)) is not None:
            sync.note_foreign(client_id, name)
