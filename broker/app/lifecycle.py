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
from typing import TYPE_CHECKING

from ..metadata.features import FEATURES
from ..network.node_server import advertised_endpoints, node_server
from ..quorum.broker_lifecycle import BrokerLifecycleManager, BrokerState
from .metrics_endpoint import serve_metrics

if TYPE_CHECKING:
    from .node import Node

log = logging.getLogger("kmirror")


MAINTENANCE_INTERVAL_S = 1.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0


class StartupError(Exception):
    pass


async def start_node(node: Node) -> None:
    """Start-up, in the order above; returns once the node serves clients."""
    cfg = node.config
    node.server = node_server(cfg, node.listener_security, node.requests.handle)
    node.server.ip_throttle = node.client_throttle.ip_connection_throttle_s
    # The controller listener first: the other voters reach this node's quorum there, and
    # the image comes from what the quorum has committed before clients are let in.
    await node.server.start(only=cfg.controller_listener_names)
    node.quorum.start()
    node._duties = asyncio.ensure_future(node.controller_duties.run())
    node._isr_checks = asyncio.ensure_future(
        node.replicas.run_isr_checks(node.config.replica_lag_time_max_ms / 2000)
    )
    await node.quorum.wait_caught_up()
    if not node._loaded:
        node.load_metadata([])
    # the logs of the image were opened above; big later batches open in the background
    node.replicas.on_hosted = node._on_hosted
    node.replicas.defer_creation = True
    node.mirror_throttle.apply()
    await node.server.start()
    endpoints = advertised_endpoints(cfg, node.server.bound_ports)
    if "broker" in cfg.process_roles:  # a controller-only node hosts no partitions
        await register_broker(node, endpoints)
    node.metadata_sync.on_metadata(node.image)
    if cfg.metrics_port:
        serve_metrics(node)
    log.info(
        "kmirror node %d started: cluster %s, listeners %s",
        cfg.node_id,
        node.cluster_id,
        ", ".join(f"{n}:{p}" for n, p in node.server.bound_ports.items()),
    )


async def register_broker(node: Node, endpoints: list[tuple[str, str, int, int]]) -> None:
    """Registered through the active controller like any broker (in process when this node
    is that controller), serving once unfenced: caught up with the metadata log."""
    cfg = node.config
    node.lifecycle = BrokerLifecycleManager(
        cfg.node_id,
        node.cluster_id,
        uuid.uuid4(),
        endpoints,
        cfg.broker_rack,
        {name: (lo, hi) for name, (lo, hi, _lvl) in FEATURES.items()},
        node._to_controller,
        lambda: node.quorum.applied_offset,
        interval_ms=cfg.broker_heartbeat_interval_ms,
        session_timeout_ms=cfg.broker_session_timeout_ms,
    )
    node.lifecycle.start()
    await node.lifecycle.wait_unfenced()
    if node.lifecycle.state is not BrokerState.RUNNING:
        raise StartupError(f"the broker was not unfenced: {node.lifecycle.last_error}")
    node.broker_epoch = node.lifecycle.broker_epoch


async def run_maintenance(node: Node) -> None:
    """Every second until cancelled: log retention and checkpoints, the cleaner, mirrors."""
    while True:
        await asyncio.sleep(MAINTENANCE_INTERVAL_S)
        try:
            now = node.clock.now_ms()
            node.logs.periodic(now)
            node.cleaner.tick(now)
            if node.meta_logs is not node.logs:
                node.meta_logs.periodic(now)
        except Exception:
            log.exception("log maintenance failed")
        # Self-healing: a transition that failed (coordinator still loading, source down)
        # is retried; stable partitions cost a dictionary lookup.
        node.mirrors.reconcile_all()


async def stop_node(node: Node) -> None:
    """Shutdown: start-up in reverse, the logs closed last (their writes drained)."""
    if node._duties is not None:
        node._duties.cancel()
    if node.lifecycle is not None:
        await controlled_shutdown(node, node.lifecycle)
    if node.server is not None:
        await node.server.close()
    await node.metadata_sync.close()
    await node.mirrors.close()
    await node.fetchers.close()
    if node._isr_checks is not None:
        node._isr_checks.cancel()
    await node.replica_fetchers.close()
    await node.alter_partition_sender.close()
    await node.replicas.close()
    await node.txn_coordinator.close()  # before the groups: completions write to them
    await node.groups.close()
    await node.mirror_coordinator.close()
    await node.share_states.close()
    node.replicas.snapshot_all()
    await node.cleaner.close()
    if node.controller_registrar is not None:
        await node.controller_registrar.close()  # it sends through the controller channel
    await node.controller_channel.close()
    for clients in (
        node.broker_clients,
        node.marker_clients,
        node.mirror_state_clients,
        node.share_state_clients,
    ):
        await clients.close()
    await node.lifecycle_channel.close()
    await node.quorum.close()
    node.logs.close()  # drains every log's writes
    node.log_writer.stop()
    if node.meta_logs is not node.logs:
        node.meta_logs.close()
    log.info("kmirror node %d stopped", node.config.node_id)


async def controlled_shutdown(node: Node, lifecycle: BrokerLifecycleManager) -> None:
    """Kafka's controlled shutdown: the controller moves this node's partition leadership
    away while it still serves, then approves the exit."""
    running = lifecycle.state is BrokerState.RUNNING
    if running and not await lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S):
        log.warning(
            "controlled shutdown not approved within %.0fs: stopping anyway",
            CONTROLLED_SHUTDOWN_TIMEOUT_S,
        )
    await lifecycle.close()
