"""`Node`: one node's parts, built in order from its server.properties, and the metadata image
they all follow.

``__init__`` composes the bundles the build_* steps return, one step per module of this
package, each given only what it needs. The methods here are the node's own job: the image's
updates (the quorum's commit listener replaces it and every part follows the delta).

A few parts call parts built after them (the object graph has cycles the import graph must
not): those get a callable of the node at construction, reading the later part once it exists
(the quorum's commit listener, the cleaner's and the markers' mirror check, the deleter of
share states, the mirror API's --describe). None of them is called during construction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

from ..cluster_view import ClusterView, PeerClients
from ..config.group_configs import GroupConfigDefaults
from ..config.server_config import ServerConfig
from ..log.clock import SystemClock
from ..metadata.image import METADATA_TOPIC, Delta, MetadataImage, apply_records
from ..metadata.snapshot import image_records, snapshot_delta
from ..metrics.broker_metrics import BrokerMetrics
from ..network.server import KafkaServer
from ..security.listeners import ListenerSecurity, build_listener_security
from .api_handlers import build_apis
from .controller_parts import build_controller
from .coordinators import build_coordinators
from .lifecycle import NodeRuntime
from .metadata_quorum import build_quorum
from .mirroring import build_mirroring
from .parts import NodeParts
from .replication import build_replication
from .request_services import build_services
from .storage import build_storage

log = logging.getLogger("kmirror")


class Node:
    """One kmirror node: built by ``__init__``, run by `start`, `maintenance` and `stop`."""

    def __init__(
        self,
        config: ServerConfig,
        cluster_id: str,
        listener_security: Mapping[str, ListenerSecurity] | None = None,
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        # TLS contexts and SASL offers per listener (SecurityConfigError names a bad key)
        listener_security = (
            listener_security if listener_security is not None else build_listener_security(config)
        )
        clock = SystemClock()
        self.metrics = BrokerMetrics()
        self.image = MetadataImage()
        self._loaded = False  # the first committed records load the image (load_metadata)
        self._tasks: set[asyncio.Task[None]] = set()
        image = lambda: self.image  # noqa: E731 - every part reads the newest image
        # per-group dynamic configs fall back to these broker values, within these bounds
        group_defaults = GroupConfigDefaults.from_static(config.static_values)
        cluster_view = ClusterView(image, config)
        # this node's TLS/SASL to its peers (SecurityConfigError names a bad key)
        peers = PeerClients(config)

        self.storage = storage = build_storage(config, clock, self._mirror_writable)
        self.quorum = quorum = build_quorum(
            config,
            cluster_id,
            clock,
            peers,
            storage.meta_logs,
            apply=self._apply_committed,
            load_snapshot=self._load_snapshot,
            snapshot_source=lambda: (self.image.offset, image_records(self.image)),
            # the active controller's duties are built with the controller, after the quorum
            on_leader_change=lambda leader, epoch: self.controller.duties.on_leader_change(
                leader, epoch
            ),
        )
        self.replication = replication = build_replication(
            config,
            clock,
            storage.logs,
            image,
            cluster_view,
            peers,
            quorum.controller_channel,
            on_hosted=self._on_hosted,
        )
        self.controller = controller = build_controller(
            config,
            cluster_id,
            image,
            quorum.quorum,
            quorum.controller_channel,
            storage.config_secrets,
            storage.replica_budget,
            group_defaults,
            storage.bootstrap_records,
            self._spawn,
            # this node's broker epoch: its registration's, once started
            broker_epoch=lambda: self.runtime.broker_epoch,
        )
        self.coordinators = coordinators = build_coordinators(
            config,
            clock,
            image,
            cluster_view,
            peers,
            replication.replicas,
            controller.routed,
            self._mirror_writable,
            self._spawn,
            # the share offsets admin needs the groups; its handlers come after them
            delete_share_state=lambda group, topic_id, partition: (
                self.apis.share_offsets.delete_state(group, topic_id, partition)
            ),
        )
        self.services = services = build_services(
            config,
            cluster_id,
            clock,
            image,
            controller.routed,
            replication.replicas,
            storage.logs,
            quorum.quorum,
            group_defaults,
            coordinators.txn_verification,
            self._mirror_writable,
        )
        self.apis = apis = build_apis(
            config,
            cluster_id,
            clock,
            self.metrics,
            image,
            listener_security,
            storage.bootstrap_records,
            services,
            quorum,
            controller,
            coordinators,
            cluster_view,
            # the mirror manager checks sources through the mirror API: built after it
            mirror_status=lambda: self.mirroring.status,
            mirror_freshness=lambda mirror, topic, p: self.mirroring.fetchers.freshness(
                mirror, topic, p
            ),
        )
        self.mirroring = build_mirroring(
            config,
            clock,
            image,
            replication.replicas,
            quorum.quorum,
            quorum.controller_channel,
            controller,
            coordinators,
            cluster_view,
            apis,
            cluster_id,
        )
        self.parts = NodeParts(
            storage,
            quorum,
            replication,
            controller,
            coordinators,
            services,
            apis,
            self.mirroring,
        )
        self.runtime = NodeRuntime(
            config,
            cluster_id,
            clock,
            self.metrics,
            listener_security,
            image,
            self.parts,
            ensure_loaded=self._ensure_loaded,
        )

    @property
    def server(self) -> KafkaServer | None:
        """The network server, once start-up has made it."""
        return self.runtime.server

    # -- late-bound callables (see the module's doc) ----------------------------------------

    def _mirror_writable(self, topic: str, partition: int) -> bool:
        """KIP-1279: may the partition be written (not a read-only mirror partition)? The
        mirror manager's answer; it is built last."""
        return self.mirroring.mirrors.writable(topic, partition)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_event_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- metadata --------------------------------------------------------------------------

    def _apply_committed(self, records: list[tuple[int, Any]]) -> None:
        """The quorum's commit listener: records under the high watermark, in offset order."""
        if not self._loaded:
            self.load_metadata(records)
        else:
            self.publish(records)

    def _load_snapshot(self, end_offset: int, records: list[tuple[int, Any]]) -> None:
        """A metadata snapshot replaces the image: at start as the first records, later (fetched
        from the leader) rebuilt from nothing and diffed with the image it replaces."""
        if not self._loaded:
            self.load_metadata(records)
            return
        old = self.image
        self.image, _ = apply_records(MetadataImage(), records, self.storage.config_secrets.open)
        self._react(snapshot_delta(old, self.image))
        log.info("metadata snapshot below offset %d replaced the image", end_offset)

    def _ensure_loaded(self) -> None:
        """Start-up, the quorum caught up: a new cluster's image, when nothing was committed."""
        if not self._loaded:
            self.load_metadata([])

    def publish(self, records: list[tuple[int, Any]]) -> None:
        self.image, delta = apply_records(self.image, records, self.storage.config_secrets.open)
        self._react(delta)

    def _react(self, delta: Delta) -> None:
        """Every part of the node follows the new image: hosted partitions, coordinator shards,
        mirroring."""
        self.replication.replicas.apply_delta(self.image, delta)
        for shards in self.coordinators.shards:
            shards.sync(self.image)
        self.mirroring.reactions.on_metadata(
            self.image, delta, serving=self.runtime.server is not None
        )

    def _on_hosted(self, keys: list[tuple[str, int]]) -> None:
        """Partitions whose logs were opened in the background after the metadata change that
        made them: the coordinators and mirroring look at them as they would have then."""
        for shards in self.coordinators.shards:
            shards.sync(self.image)
        self.mirroring.reactions.on_hosted(self.image, keys)

    def load_metadata(self, records: list[tuple[int, Any]]) -> None:
        """The first committed records after start: build the image from nothing and clear what
        the log dirs hold that it no longer knows."""
        self._loaded = True
        self.image, delta = apply_records(
            MetadataImage(), records, self.storage.config_secrets.open
        )
        self._remove_stray_partitions()
        self._react(delta)
        log.info("metadata loaded: %d records, %d topics", len(records), len(self.image.topics))

    def _remove_stray_partitions(self) -> None:
        """Partitions on disk that the metadata no longer knows (deleted while down)."""
        logs = self.storage.logs
        for plog in list(logs.all_logs()):
            topic = self.image.topics.get(plog.topic)
            if plog.topic == METADATA_TOPIC:
                continue
            if (
                topic is None
                or plog.partition not in topic.partitions
                or (plog.topic_id and plog.topic_id != topic.topic_id)
            ):
                log.info("removing stray partition %s-%d", plog.topic, plog.partition)
                logs.delete(plog.topic, plog.partition)

    # -- lifecycle (lifecycle.py) -----------------------------------------------------------

    async def start(self) -> None:
        await self.runtime.start()

    async def maintenance(self) -> None:
        await self.runtime.maintenance()

    async def stop(self) -> None:
        await self.runtime.stop()
