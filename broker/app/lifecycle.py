"""Start-up, the maintenance loop and shutdown of a built node, in their order.

Start-up: logs (crash recovery, at construction) -> controller listener -> quorum (its snapshot,
then committed records into the image) -> client listeners -> broker registration (serving once
unfenced) -> metrics. Shutdown reverses it and leaves a clean-shutdown marker so the next start
skips CRC recovery.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..config.server_config import ServerConfig
from ..log.clock import Clock
from ..metadata.features import FEATURES
from ..metadata.image import MetadataImage
from ..metrics.broker_metrics import BrokerMetrics
from ..network.node_server import advertised_endpoints, node_server
from ..network.server import KafkaServer
from ..quorum.broker_lifecycle import BrokerLifecycleManager, BrokerState
from ..security.listeners import ListenerSecurity
from .metrics_endpoint import serve_metrics
from .parts import NodeParts

log = logging.getLogger("kmirror")


MAINTENANCE_INTERVAL_S = 1.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0


class StartupError(Exception):
    pass


class NodeRuntime:
    """Runs a built node's parts: `start`, `maintenance`, `stop`. It keeps what start-up
    makes (the server, the broker registration, the background loops) as it goes, so that
    `stop` closes what exists whenever it comes."""

    def __init__(
        self,
        config: ServerConfig,
        cluster_id: str,
        clock: Clock,
        metrics: BrokerMetrics,
        listener_security: Mapping[str, ListenerSecurity],
        image: Callable[[], MetadataImage],
        parts: NodeParts,
        ensure_loaded: Callable[[], None],
    ) -> None:
        """``ensure_loaded``: builds the image from nothing when the quorum, caught up, has
        committed no records yet (a new cluster)."""
        self._config = config
        self._cluster_id = cluster_id
        self._clock = clock
        self._metrics = metrics
        self._listener_security = listener_security
        self._image = image
        self._parts = parts
        self._ensure_loaded = ensure_loaded
        self.server: KafkaServer | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self.broker_epoch = -1  # once registered
        self._duties: asyncio.Future[None] | None = None
        self._isr_checks: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Start-up, in the order above; returns once the node serves clients."""
        cfg, parts = self._config, self._parts
        quorum, replicas = parts.quorum.quorum, parts.replication.replicas
        self.server = server = node_server(cfg, self._listener_security, parts.apis.requests.handle)
        # the server takes its per-IP connection throttle as an attribute (broker/network)
        server.ip_throttle = parts.apis.client_throttle.ip_connection_throttle_s
        # The controller listener first: the other voters reach this node's quorum there, and
        # the image comes from what the quorum has committed before clients are let in.
        await server.start(only=cfg.controller_listener_names)
        quorum.start()
        self._duties = asyncio.ensure_future(parts.controller.duties.run())
        self._isr_checks = asyncio.ensure_future(
            replicas.run_isr_checks(cfg.replica_lag_time_max_ms / 2000)
        )
        await quorum.wait_caught_up()
        self._ensure_loaded()
        # the logs of the image were opened above; big later batches open in the background
        replicas.defer_creation = True
        parts.mirroring.throttle.apply()
        await server.start()
        endpoints = advertised_endpoints(cfg, server.bound_ports)
        if "broker" in cfg.process_roles:  # a controller-only node hosts no partitions
            await self._register_broker(endpoints)
        parts.mirroring.metadata_sync.on_metadata(self._image())
        if cfg.metrics_port:
            serve_metrics(
                cfg, self._clock, self._metrics, self._image, parts, server, lambda: self.lifecycle
            )
        log.info(
            "kmirror node %d started: cluster %s, listeners %s",
            cfg.node_id,
            self._cluster_id,
            ", ".join(f"{n}:{p}" for n, p in server.bound_ports.items()),
        )

    async def _register_broker(self, endpoints: list[tuple[str, str, int, int]]) -> None:
        """Registered through the active controller like any broker (in process when this
        node is that controller), serving once unfenced: caught up with the metadata log."""
        cfg, quorum = self._config, self._parts.quorum.quorum
        self.lifecycle = lifecycle = BrokerLifecycleManager(
            cfg.node_id,
            self._cluster_id,
            uuid.uuid4(),
            endpoints,
            cfg.broker_rack,
            {name: (lo, hi) for name, (lo, hi, _lvl) in FEATURES.items()},
            self._to_controller,
            lambda: quorum.applied_offset,
            interval_ms=cfg.broker_heartbeat_interval_ms,
            session_timeout_ms=cfg.broker_session_timeout_ms,
        )
        lifecycle.start()
        await lifecycle.wait_unfenced()
        if lifecycle.state is not BrokerState.RUNNING:
            raise StartupError(f"the broker was not unfenced: {lifecycle.last_error}")
        self.broker_epoch = lifecycle.broker_epoch

    async def _to_controller(self, api_key: int, body: Any) -> Any:
        """The broker lifecycle's requests: in process when this node is the active controller
        (its own controller needs no listener or ACL to register it), else over the channel."""
        if self._parts.quorum.quorum.is_leader:
            return await self._parts.apis.lifecycle_api.local(api_key, body)
        return await self._parts.quorum.lifecycle_channel.request(api_key, body)

    async def maintenance(self) -> None:
        """Every second until cancelled: log retention and checkpoints, the cleaner, mirrors."""
        storage = self._parts.storage
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                now = self._clock.now_ms()
                storage.logs.periodic(now)
                storage.cleaner.tick(now)
                if storage.meta_logs is not storage.logs:
                    storage.meta_logs.periodic(now)
            except Exception:
                log.exception("log maintenance failed")
            # Self-healing: a transition that failed (coordinator still loading, source down)
            # is retried; stable partitions cost a dictionary lookup.
            self._parts.mirroring.mirrors.reconcile_all()

    async def stop(self) -> None:
        """Shutdown: start-up in reverse, the logs closed last (their writes drained)."""
        p = self._parts
        storage, quorum, co, mirroring = p.storage, p.quorum, p.coordinators, p.mirroring
        replication = p.replication
        if self._duties is not None:
            self._duties.cancel()
        if self.lifecycle is not None:
            await controlled_shutdown(self.lifecycle)
        if self.server is not None:
            await self.server.close()
        await mirroring.metadata_sync.close()
        await mirroring.mirrors.close()
        await mirroring.fetchers.close()
        if self._isr_checks is not None:
            self._isr_checks.cancel()
        await replication.replica_fetchers.close()
        await replication.alter_partition_sender.close()
        await replication.replicas.close()
        await co.txn_coordinator.close()  # before the groups: completions write to them
        await co.groups.close()
        await co.mirror_coordinator.close()
        await co.share_states.close()
        replication.replicas.snapshot_all()
        await storage.cleaner.close()
        if quorum.controller_registrar is not None:
            await quorum.controller_registrar.close()  # it sends through the controller channel
        await quorum.controller_channel.close()
        for clients in (
            co.broker_clients,
            co.marker_clients,
            co.mirror_state_clients,
            co.share_state_clients,
        ):
            await clients.close()
        await quorum.lifecycle_channel.close()
        await quorum.quorum.close()
        storage.logs.close()  # drains every log's writes
        storage.log_writer.stop()
        if storage.meta_logs is not storage.logs:
            storage.meta_logs.close()
        log.info("kmirror node %d stopped", self._config.node_id)


async def controlled_shutdown(lifecycle: BrokerLifecycleManager) -> None:
    """Kafka's controlled shutdown: the controller moves this node's partition leadership
    away while it still serves, then approves the exit."""
    running = lifecycle.state is BrokerState.RUNNING
    if running and not await lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S):
        log.warning(
            "controlled shutdown not approved within %.0fs: stopping anyway",
            CONTROLLED_SHUTDOWN_TIMEOUT_S,
        )
    await lifecycle.close()
