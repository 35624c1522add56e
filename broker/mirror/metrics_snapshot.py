"""The mirror metrics snapshot: what the state driver, the fetchers and the metadata sync know,
copied into the plain data `broker.metrics.mirror_metrics` turns into Prometheus series.

Runs on the event loop (see `read_on_loop`) once per scrape; costs one pass over the mirror
partitions and fetchers of this node.
"""

from collections.abc import Mapping
from typing import Final, Protocol

from ..controller.mirrors import mirror_names
from ..metadata.image import MetadataImage
from ..metadata.mirror_states import MirrorState
from ..metrics.mirror_metrics import FetcherRow, MirrorSnapshot, PartitionRow
from .fetcher import MirrorFetcherManager
from .manager import MirrorManager

# Error kinds of the metadata sync reported as 0 until they happen: the KIP's MetadataRefreshError,
# TopicConfigMetadataSyncError, ConsumerGroupOffsetSyncError and AclSyncError.
KIP_SYNC_ERROR_KINDS: Final = ("metadata", "topic_configs", "groups", "acls")
STATES: Final = tuple(s.name for s in MirrorState if s != MirrorState.UNKNOWN)


class SyncCounters(Protocol):
    """The counters `MirrorMetadataSync` keeps (read only)."""

    @property
    def errors(self) -> Mapping[tuple[str, str], int]: ...
    @property
    def skipped(self) -> Mapping[tuple[str, str], int]: ...
    @property
    def last_refresh_ms(self) -> Mapping[str, int]: ...


def build_snapshot(
    image: MetadataImage,
    manager: MirrorManager,
    fetchers: MirrorFetcherManager,
    sync: SyncCounters,
) -> MirrorSnapshot:
    rows: dict[tuple[str, str, int], PartitionRow] = {}
    for (topic, partition), info in manager.partitions().items():
        # FAILED counts as failing after the fetcher has let the partition go, too.
        rows[(info.mirror, topic, partition)] = PartitionRow(
            info.mirror, topic, partition, info.state.name, None, info.state == MirrorState.FAILED
        )
    for mirror in fetchers.mirrors():
        for topic, partition in fetchers.partitions(mirror):
            st = fetchers.status(mirror, topic, partition)
            if st is None:
                continue
            known = rows.get((mirror, topic, partition))
            rows[(mirror, topic, partition)] = PartitionRow(
                mirror,
                topic,
                partition,
                known.state if known is not None else None,
                st.lag if st.source_high_watermark >= 0 else None,
                st.failed or st.error is not None or (known is not None and known.fetch_failing),
                _committed_lag(fetchers, topic, partition, st.source_last_stable_offset),
                st.held if st.source_high_watermark >= 0 else None,
            )
    return MirrorSnapshot(
        mirrors=tuple(mirror_names(image)),
        states=STATES,
        partitions=tuple(rows.values()),
        fetchers=tuple(
            FetcherRow(
                mirror,
                node,
                fid,
                alive,
                c.requests,
                c.errors,
                c.response_bytes,
                c.appended_bytes,
                c.throttled_bytes,
                c.throttled_seconds,
                c.network,
                c.source_throttled_seconds,
            )
            for mirror, node, fid, alive, c in fetchers.fetcher_stats()
        ),
        sync_errors=dict(sync.errors),
        sync_skipped=dict(sync.skipped),
        sync_error_kinds=KIP_SYNC_ERROR_KINDS,
        last_refresh_ms=dict(sync.last_refresh_ms),
        throttle_rate=fetchers.throttle.rate or 0.0,
        truncation_timeouts=dict(manager.truncation_timeouts),
    )


def _committed_lag(
    fetchers: MirrorFetcherManager, topic: str, partition: int, source_lso: int
) -> int | None:
    plog = fetchers.get_log(topic, partition)
    if source_lso < 0 or plog is None:
        return None
    return max(0, source_lso - int(plog.last_stable_offset))
