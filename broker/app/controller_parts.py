"""The replica manager and the controller with its parts: ACLs, elections, cluster control,
AlterPartition, reassignments, mirrors, and the duties of the active controller (run while this
node leads the quorum).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import topic_configs
from ..controller.acls import AclController
from ..controller.active_duties import ActiveControllerDuties
from ..controller.alter_partition import AlterPartitionControl
from ..controller.broker_configs import validate_broker_config
from ..controller.cluster_control import ClusterControl
from ..controller.controller import Controller, Validators
from ..controller.elections import LeaderBalance, LeaderElections
from ..controller.mirrors import MirrorController
from ..controller.partition_change import UncleanElection
from ..controller.reassignment import Reassignments
from ..metadata.features import FEATURES
from ..metadata.image import apply_records
from ..mirror.node_view import THROTTLED_REPLICAS_KEY
from ..replication.replica_manager import ReplicaManager

if TYPE_CHECKING:
    from .node import Node


SESSION_CHECK_INTERVAL_S = 1.0
LIST_CONFIG_KEYS = frozenset(  # list-type topic keys: APPEND/SUBTRACT work on them
    {
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        THROTTLED_REPLICAS_KEY,
    }
)


def monotonic_ms() -> int:
    """Broker sessions are measured on a monotonic clock, not wall time."""
    return time.monotonic_ns() // 1_000_000


class PublishingQuorum:
    """The controller's commits: through the metadata quorum, answered once every record is
    applied to this node's image (the quorum's commit listener applies them). The append and
    the wait for its commit are apart (``WritableQuorum``): the controller's written state
    holds a batch from the moment it is appended."""

    def __init__(self, node: Node) -> None:
        self._node = node

    def leader_epoch(self) -> int | None:
        return self._node.quorum.leader_epoch()

    def begin_append(self, records: Sequence[Any]) -> tuple[int, int]:
        return self._node.quorum.begin_append(records)

    async def wait_committed(self, epoch: int, last_offset: int) -> None:
        await self._node.quorum.wait_committed(epoch, last_offset)

    async def append(self, records: Sequence[Any]) -> int:
        return await self._node.quorum.append(records)


def build_controller(node: Node) -> None:
    """The replica manager, and the controller with its parts (it acts when this node leads
    the quorum)."""
    config = node.config
    node.replicas = ReplicaManager(
        config.node_id,
        node.logs,
        node._log_config_for,
        node.clock,
        node._replication_config_for,
        producer_id_expiration_ms=config.producer_id_expiration_ms,
    )
    node.controller = Controller(
        PublishingQuorum(node),
        lambda: node.image,
        Validators(
            topic_config=topic_configs.validate,
            broker_config=validate_broker_config,
            list_keys=LIST_CONFIG_KEYS,
            default_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            secrets=node.config_secrets,
            replica_budget=node.replica_budget,
            group_defaults=node.group_defaults,
        ),
        config.node_id,
        ready=node.quorum.wait_writable,
        # the written state applies batches as the node applies committed ones
        apply=lambda img, pairs: apply_records(img, pairs, node.config_secrets.open)[0],
    )
    node.acl_controller = AclController(node.controller)
    node.elections = LeaderElections(node.controller)
    node.cluster_control = ClusterControl(
        node.controller,
        node.cluster_id,
        config.broker_session_timeout_ms,
        next_offset=lambda: node.quorum.end_offset,
        unclean=UncleanElection(config.unclean_leader_election_enable, config.node_id),
    )
    node.alter_partition_control = AlterPartitionControl(node.controller)
    node.reassignments = Reassignments(
        node.controller,
        UncleanElection(config.unclean_leader_election_enable, config.node_id),
    )
    node.controller_duties = ActiveControllerDuties(
        config.node_id,
        node.controller,
        node.cluster_control,
        lambda: node.quorum.is_leader,
        # written to the metadata log as Kafka 4.1's format does: the non-zero levels
        # (group.version 1 turns the KIP-848 consumer group protocol on)
        {n: lvl for n, (_lo, _hi, lvl) in FEATURES.items() if lvl > 0},
        node._spawn,
        monotonic_ms,
        SESSION_CHECK_INTERVAL_S,
        leader_balance=(
            LeaderBalance(node.elections, config.leader_imbalance_check_interval_seconds * 1000)
            if config.auto_leader_rebalance_enable
            else None
        ),
        bootstrap=node.bootstrap_records,
    )
    node.mirror_controller = MirrorController(
        node.controller,
        state_topic_partitions=config.mirror_topic_num_partitions,
        state_topic_replication_factor=config.mirror_topic_replication_factor,
    )
