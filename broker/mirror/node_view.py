"""The node's side of mirroring: what the mirror manager, the fetchers and the mirror API ask
of the node, built by the composition root (`broker.app`) from the parts it owns.

- `MirrorSources`: questions for a mirror's source cluster, one short-lived `SourceClient` each:
  its cluster id, and how far a failback must truncate a partition before mirroring it.
- `MirrorThrottle`: ``mirror.replication.throttled.rate`` (broker config, per node or the
  cluster default, else server.properties) and ``mirror.replication.throttled.replicas`` (topic
  config) applied to the fetchers.
- `MirrorStatusView`: what ``--describe`` shows of a mirror's partitions: states, progress and a
  note (why FAILED, what a truncation removed, how old a paused partition's numbers are).
- `MirrorReactions`: what a metadata change means for mirroring on this node.

The mirror API is reached through the callables it is given (this layer is below ``broker.api``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..config.throttled_replicas import ThrottledReplicasError, parse_throttled_replicas
from ..coordinator.mirror import MirrorCoordinator
from ..metadata.image import BROKER_RESOURCE, MIRROR_RESOURCE, TOPIC_RESOURCE, Delta, MetadataImage
from ..metadata.mirror_states import MirrorState
from ..replication.partition import Partition
from ..replication.replica_manager import ReplicaManager
from .core import truncation
from .fetch_state import copyable_lag
from .fetcher import MirrorFetcherManager
from .manager import MirrorManager, SourceRefused
from .metadata_sync import MirrorMetadataSync
from .source import SourceClient

log = logging.getLogger(__name__)

THROTTLE_KEY = "mirror.replication.throttled.rate"
THROTTLED_REPLICAS_KEY = "mirror.replication.throttled.replicas"
NO_LIMIT = (1 << 63) - 1  # Kafka's default rate, Long.MAX_VALUE


class MirrorSources:
    """The mirror manager's questions for a mirror's source cluster."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        node_id: int,
        known_cluster_id: Callable[[str], str],
        identity_problem: Callable[[str, str | None], str | None],
    ) -> None:
        self._image = image
        self._node_id = node_id
        self._known_cluster_id = known_cluster_id  # recorded in the metadata log, "" if not
        self._identity_problem = identity_problem  # why that source must not be mirrored

    def _client(self, mirror: str) -> SourceClient:
        config = dict(self._image().config(MIRROR_RESOURCE, mirror))
        return SourceClient(config, f"kmirror-{self._node_id}-mirror-{mirror}")

    async def cluster_id(self, mirror: str) -> str | None:
        """The recorded source cluster id, else the one the source reports (None: unknown)."""
        cid = self._known_cluster_id(mirror)
        if cid:
            return cid
        try:
            client = self._client(mirror)
        except ValueError:
            return None
        try:
            return await asyncio.wait_for(client.cluster_id(), 5)
        except Exception:
            log.warning("mirror %s: source cluster id unknown (source unreachable)", mirror)
            return None
        finally:
            await client.close()

    async def align(self, mirror: str, topic: str, partition: int, part: Partition) -> str | None:
        """PREPARING: drop local epochs the source never mirrored from us (failback), through
        the partition (which brings its HW down with the cut). Returns what was truncated and
        why (shown by --describe), or None when nothing was (`core.truncation` decides)."""
        if part.log.log_end_offset <= part.log.log_start_offset:
            return None  # nothing local: a first start copies everything anyway
        client = self._client(mirror)
        try:
            # the cluster-id guard on this very connection: the config may have changed since
            # the manager checked, and truncating by a wrong source's epochs loses data
            cid = await asyncio.wait_for(client.cluster_id(), 30)
            problem = self._identity_problem(mirror, cid)
            if problem:
                raise SourceRefused(problem)
            epochs = await asyncio.wait_for(client.last_mirrored_epochs(mirror), 30)
        finally:
            await client.close()
        confirmed = None if epochs is None else epochs.get((topic, partition))
        plog = part.log
        cut = truncation.lme_truncation(
            plog.leader_epoch_cache.entries(),
            plog.log_start_offset,
            plog.log_end_offset,
            confirmed,
        )
        if cut is None:
            return None
        log.warning("mirror %s: %s-%d %s", mirror, topic, partition, cut[1])
        part.cut_at(cut[0])
        return cut[1]


class MirrorThrottle:
    """The replication throttle of this node's mirror fetchers, from the image's configs."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        node_id: int,
        default_rate: int,
        fetchers: MirrorFetcherManager,
    ) -> None:
        self._image = image
        self._node_id = node_id
        self._default_rate = default_rate  # server.properties' mirror.replication.throttled.rate
        self._fetchers = fetchers

    def apply(self) -> None:
        """Re-read the rate and the throttled partitions (after a broker or topic config
        changed, and once at start)."""
        img, node = self._image(), str(self._node_id)
        raw = img.config(BROKER_RESOURCE, node).get(THROTTLE_KEY) or img.config(
            BROKER_RESOURCE, ""
        ).get(THROTTLE_KEY)
        rate = int(raw) if raw is not None else self._default_rate
        # <= 0 or the default Long.MAX_VALUE: no limit at all (not a 9.2e18 bytes/s bucket)
        self._fetchers.set_throttle(rate if 0 < rate < NO_LIMIT else None)
        self._fetchers.set_throttled_replicas(self.throttles)

    def throttles(self, topic: str, partition: int) -> bool:
        """mirror.replication.throttled.replicas of ``topic`` lists ``partition`` for this node."""
        raw = self._image().config(TOPIC_RESOURCE, topic).get(THROTTLED_REPLICAS_KEY, "")
        try:
            return parse_throttled_replicas(raw).throttles(partition, self._node_id)
        except ThrottledReplicasError:  # validated when set; an old bad value throttles nothing
            return False


class MirrorStatusView:
    """What the mirror API's --describe and --add read of this node's mirror partitions."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        now_ms: Callable[[], int],
        coordinator: MirrorCoordinator,
        mirrors: MirrorManager,
        fetchers: MirrorFetcherManager,
        replicas: ReplicaManager,
    ) -> None:
        self._image = image
        self._now_ms = now_ms
        self._coordinator = coordinator
        self._mirrors = mirrors
        self._fetchers = fetchers
        self._replicas = replicas

    def states(self, mirror: str) -> dict[tuple[str, int], tuple[str, int]]:
        """Stored states (including failed-over topics that left the mirror) overlaid with the
        driver's live view: (topic, partition) -> (state name, last mirror epoch or -1)."""
        out: dict[tuple[str, int], tuple[str, int]] = {}
        img = self._image()
        for (_m, topic_id, p), state, lme in self._coordinator.states(mirror):
            t = img.topic_by_id(topic_id)
            if t is not None:
                out[(t.name, p)] = (state.name, -1 if lme is None else lme)
        for key, info in self._mirrors.partitions(mirror).items():
            out[key] = (
                info.state.name,
                -1 if info.last_mirror_epoch is None else info.last_mirror_epoch,
            )
        return out

    def progress(self, mirror: str, topic: str, partition: int) -> tuple[int, int, int, int] | None:
        """(source high watermark, local log end offset, lag, source last stable offset) of a
        mirrored partition; the lag runs to the source's LSO (`fetch_state.copyable_lag`)."""
        st = self._fetchers.status(mirror, topic, partition)
        if st is not None:
            hw, leo = st.source_high_watermark, st.local_log_end_offset
            return hw, leo, st.lag, st.source_last_stable_offset
        known = self._fetchers.last_known(mirror, topic, partition)
        hosted = self._replicas.get(topic, partition)
        if known is None or hosted is None:
            return None
        leo = int(hosted.log.log_end_offset)
        lag, _held = copyable_lag(known[0], known[2], leo)
        return known[0], leo, lag, known[2]  # paused: the last answer's numbers

    def reason(self, topic: str, partition: int) -> str | None:
        """--describe's note: why FAILED, what a truncation removed, or how old the source
        offset of a partition no longer fetched is."""
        why = self._mirrors.reason(topic, partition)
        info = self._mirrors.partitions().get((topic, partition))
        if why or info is None:
            return why
        known = self._fetchers.last_known(info.mirror, topic, partition)
        if known is None or info.state != MirrorState.PAUSED:
            return None
        age = max(0, self._now_ms() - known[1]) / 1000
        return f"not fetched while paused: source offset {known[0]} as of {age:.0f}s ago"


class MirrorReactions:
    """The mirror parts' share of the node's metadata listener."""

    def __init__(
        self, mirrors: MirrorManager, throttle: MirrorThrottle, metadata_sync: MirrorMetadataSync
    ) -> None:
        self._mirrors = mirrors
        self._throttle = throttle
        self._sync = metadata_sync

    def on_metadata(self, image: MetadataImage, delta: Delta, serving: bool) -> None:
        """The state driver sees every change; the throttle is re-read when a broker or topic
        config changed, and the metadata sync when a mirror's config did (once serving)."""
        self._mirrors.on_metadata(image, delta)
        changed = {rtype for rtype, _ in delta.changed_configs}
        if BROKER_RESOURCE in changed or TOPIC_RESOURCE in changed:
            self._throttle.apply()
        if serving and MIRROR_RESOURCE in changed:
            self._sync.on_metadata(image)

    def on_hosted(self, image: MetadataImage, keys: list[tuple[str, int]]) -> None:
        """Partitions whose logs were opened after the metadata change that made them."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in keys:
            by_topic.setdefault(topic, []).append(partition)
        for topic, partitions in by_topic.items():
            self._mirrors.reconcile_topic(image, topic, partitions=partitions)
