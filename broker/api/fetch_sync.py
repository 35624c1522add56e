"""Synchronous mirroring, the Fetch side (docs/protocol.md, "Synchronous mirroring on the wire"):
a kmirror mirror's consumer Fetch names the mirror (tag 1279) and, per partition, what its
destination committed; for the partitions of ``mirror.sync.enable`` topics this node leads, that
goes to `broker.mirror.sync_acks.SyncAcks`, which wakes the acks=all produces waiting for it.

Only the partitions the request names are read: an incremental Fetch leaves out the ones whose
values did not change (the source keeps the last), so an idle mirror of thousands of partitions
costs nothing here; each Fetch keeps the mirror known (`SyncAcks.seen`), and a partition the
session forgets is forgotten for that mirror too."""

from collections.abc import Mapping
from typing import Any

from protocol.encoders.fetch_request import FetchRequestView

from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..mirror.core.sync_acks_state import SyncPolicy, policy_of
from ..mirror.sync_acks import SyncAcks
from .fetch_sessions import SessionPartition
from .services import Services


def _topic_name(img: MetadataImage, tkey: Any, by_id: bool) -> str | None:
    topic = img.topic_by_id(tkey) if by_id else img.topics.get(tkey)
    return None if topic is None else str(topic.name)


def report_commits(s: Services, sync: SyncAcks, req: FetchRequestView, by_id: bool) -> None:
    mirror = req.mirror_sync_id
    assert mirror is not None
    sync.seen(mirror)
    img = s.image()
    for t in req.topics:
        reported = [p for p in t.partitions if p.mirror_committed_offset >= 0]
        if not reported:
            continue
        name = _topic_name(img, t.topic_id if by_id else t.topic, by_id)
        policy: SyncPolicy | None = None
        if name is not None:
            policy = policy_of(img.config(TOPIC_RESOURCE, name))
        if name is None or policy is None:
            continue  # not a sync topic: nothing waits for this mirror
        for p in reported:
            hosted = s.replicas.get(name, p.partition)
            if hosted is not None and hosted.is_leader:
                sync.report(
                    name,
                    p.partition,
                    mirror,
                    p.mirror_committed_offset,
                    hosted.leader.high_watermark,
                    policy,
                )
    for ft in req.forgotten_topics_data:
        name = _topic_name(img, ft.topic_id if by_id else ft.topic, by_id)
        if name is not None:
            for partition in ft.partitions:
                sync.drop(name, partition, mirror)


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
