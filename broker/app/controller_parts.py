"""The replica manager and the controller with its parts: ACLs, elections, cluster control,
AlterPartition, reassignments, mirrors, and the duties of the active controller (run while this
node leads the quorum).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from .. import topic_configs
from ..api.routed_controller import RoutedController
from ..config.group_configs import GroupConfigDefaults
from ..config.server_config import ServerConfig
from ..controller.acls import AclController
from ..controller.active_duties import ActiveControllerDuties
from ..controller.alter_partition import AlterPartitionControl
from ..controller.broker_configs import validate_broker_config
from ..controller.cluster_control import ClusterControl
from ..controller.config_secrets import ConfigSecrets
from ..controller.controller import Controller, Validators
from ..controller.elections import LeaderBalance, LeaderElections
from ..controller.fd_budget import ReplicaBudget
from ..controller.mirrors import MirrorController
from ..controller.partition_change import UncleanElection
from ..controller.reassignment import Reassignments
from ..metadata.features import FEATURES
from ..metadata.image import MetadataImage, apply_records
from ..mirror.node_view import THROTTLED_REPLICAS_KEY
from ..quorum.controller_channel import ControllerChannel
from ..quorum.node_quorum import MetadataQuorum

# how often the active controller looks for expired sessions: a fencing comes at most this long
# after the session timeout (Kafka schedules it at the expiry itself); a look costs a scan of
# the registered brokers
SESSION_CHECK_INTERVAL_S = 0.25
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


@dataclass(frozen=True, slots=True)
class ControllerParts:
    """What `build_controller` made."""

    controller: Controller
    acl_controller: AclController
    elections: LeaderElections
    cluster_control: ClusterControl
    alter_partition_control: AlterPartitionControl
    reassignments: Reassignments
    duties: ActiveControllerDuties  # run while this node leads the quorum
    mirror_controller: MirrorController
    routed: RoutedController  # the active controller's calls from any node


def build_controller(
    config: ServerConfig,
    cluster_id: str,
    image: Callable[[], MetadataImage],
    quorum: MetadataQuorum,
    controller_channel: ControllerChannel,
    secrets: ConfigSecrets,
    replica_budget: ReplicaBudget | None,
    group_defaults: GroupConfigDefaults,
    bootstrap_records: list[Any],
    spawn: Callable[[Coroutine[Any, Any, None]], None],
    broker_epoch: Callable[[], int],
) -> ControllerParts:
    """The controller with its parts (it acts when this node leads the quorum). Its commits go
    through the quorum (``WritableQuorum``: the append and the wait for its commit apart, so
    the written state holds a batch from the moment it is appended) and are answered once
    the quorum's commit listener has applied them to the image. ``broker_epoch``: this
    node's, once registered (for the calls routed to another node's controller)."""
    controller = Controller(
        quorum,
        image,
        Validators(
            topic_config=topic_configs.validate,
            broker_config=validate_broker_config,
            list_keys=LIST_CONFIG_KEYS,
            default_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            secrets=secrets,
            replica_budget=replica_budget,
            group_defaults=group_defaults,
        ),
        config.node_id,
        ready=quorum.wait_writable,
        # the written state applies batches as the node applies committed ones
        apply=lambda img, pairs: apply_records(img, pairs, secrets.open)[0],
    )
    is_leader = lambda: quorum.is_leader  # noqa: E731 - False on a broker-only node
    elections = LeaderElections(controller)
    cluster_control = ClusterControl(
        controller,
        cluster_id,
        config.broker_session_timeout_ms,
        next_offset=lambda: quorum.end_offset,
        unclean=UncleanElection(config.unclean_leader_election_enable, config.node_id),
        silent_for=quorum.silent_for,
    )
    duties = ActiveControllerDuties(
        config.node_id,
        controller,
        cluster_control,
        is_leader,
        # written to the metadata log as Kafka 4.1's format does: the non-zero levels
        # (group.version 1 turns the KIP-848 consumer group protocol on)
        {n: lvl for n, (_lo, _hi, lvl) in FEATURES.items() if lvl > 0},
        spawn,
        monotonic_ms,
        SESSION_CHECK_INTERVAL_S,
        leader_balance=(
            LeaderBalance(elections, config.leader_imbalance_check_interval_seconds * 1000)
            if config.auto_leader_rebalance_enable
            else None
        ),
        bootstrap=bootstrap_records,
        # a controller acts on a timer only once the quorum confirms it still leads, and its
        # own stalls are no broker's silence
        leadership_confirmed=quorum.leadership_confirmed,
        stalled_ms=quorum.stall_watch.stalled_now,
        confirm_needs_append=quorum.confirm_needs_append,
    )
    return ControllerParts(
        controller=controller,
        acl_controller=AclController(controller),
        elections=elections,
        cluster_control=cluster_control,
        alter_partition_control=AlterPartitionControl(controller),
        reassignments=Reassignments(
            controller,
            UncleanElection(config.unclean_leader_election_enable, config.node_id),
        ),
        duties=duties,
        mirror_controller=MirrorController(
            controller,
            state_topic_partitions=config.mirror_topic_num_partitions,
            state_topic_replication_factor=config.mirror_topic_replication_factor,
        ),
        # internal topics and producer id blocks reach the active controller from any node
        routed=RoutedController(
            controller, config.node_id, is_leader, lambda: controller_channel, broker_epoch
        ),
    )
