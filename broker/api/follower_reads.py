"""The leader's side of KIP-392 for one partition: the replica a consumer should read from.

Glue between the hosted partition (what the leader knows of its followers), the metadata image
(brokers' racks and endpoints) and the selector (`replication.replica_selector`).
"""

from __future__ import annotations

from typing import Any

from ..metadata.image import MetadataImage
from ..replication.partition import Partition
from ..replication.replica_selector import FollowerView, preferred_read_replica


def preferred_replica_for(
    hosted: Partition,
    selector: str | None,
    client_rack: str,
    fetch_offset: int,
    image: MetadataImage,
    listener: str,
    now_ms: int,
) -> int:
    """-1 (read here) unless this node leads and the selector names another replica."""
    if selector is None or not hosted.is_leader:
        return -1
    state = hosted.leader

    def rack_of(broker_id: int) -> tuple[bool, str | None]:
        b: Any = image.brokers.get(broker_id)
        if b is None or b.fenced or b.endpoint(listener) is None:
            return False, None
        return True, b.rack

    followers = (
        FollowerView(r, p.log_start_offset, p.log_end_offset, p.last_caught_up_ms)
        for r, p in state.followers.items()
    )
    return preferred_read_replica(
        selector,
        client_rack,
        hosted.local_id,
        hosted.log.log_end_offset,
        state.isr,
        followers,
        fetch_offset,
        now_ms,
        rack_of,
    )
