"""Which APIs each listener serves, as Kafka splits them between its broker and controller.

A Kafka 4.1 node serves a controller listener (``controller.listener.names``) with its
ControllerApis and every other listener with its KafkaApis; each listener's ApiVersions lists
exactly its own set, and a request for an API the listener does not serve is refused by the
socket server before any handler sees it: the connection is closed, unanswered.

- Controller listeners: the APIs Kafka's ControllerApis handles (the quorum RPCs, FetchSnapshot,
  Fetch of the metadata log, broker registration and heartbeats, AlterPartition, Envelope,
  AllocateProducerIds, the admin RPCs a controller serves itself, DescribeCluster, ...), and the
  KIP-1279 RPCs whose schemas name the controller listener (the mirror admin RPCs the controller
  writes records for, BumpLeaderEpochs, Read/WriteMirrorStates).
- Broker listeners: everything else this node serves, never the APIs whose schemas name only
  the controller listener (`CONTROLLER_ONLY`).

Either set is cut down to the node's handler table, so a key is listed only where a handler is.
"""

from collections.abc import Collection, Set
from typing import Final

from protocol.errors import RequestError

# Kafka 4.1's ControllerApis.handle, by api key.
KAFKA_CONTROLLER_APIS: Final[frozenset[int]] = frozenset(
    {
        1,  # Fetch (of __cluster_metadata-0; anything else is INVALID_REQUEST there)
        17,  # SaslHandshake
        18,  # ApiVersions
        19,  # CreateTopics
        20,  # DeleteTopics
        29,  # DescribeAcls
        30,  # CreateAcls
        31,  # DeleteAcls
        32,  # DescribeConfigs
        33,  # AlterConfigs
        36,  # SaslAuthenticate
        37,  # CreatePartitions
        38,  # CreateDelegationToken
        39,  # RenewDelegationToken
        40,  # ExpireDelegationToken
        43,  # ElectLeaders
        44,  # IncrementalAlterConfigs
        45,  # AlterPartitionReassignments
        46,  # ListPartitionReassignments
        49,  # AlterClientQuotas
        51,  # AlterUserScramCredentials
        52,  # Vote
        53,  # BeginQuorumEpoch
        54,  # EndQuorumEpoch
        55,  # DescribeQuorum
        56,  # AlterPartition
        57,  # UpdateFeatures
        58,  # Envelope
        59,  # FetchSnapshot
        60,  # DescribeCluster
        62,  # BrokerRegistration
        63,  # BrokerHeartbeat
        64,  # UnregisterBroker
        67,  # AllocateProducerIds
        70,  # ControllerRegistration
        73,  # AssignReplicasToDirs
        80,  # AddRaftVoter
        81,  # RemoveRaftVoter
        82,  # UpdateRaftVoter
    }
)

# KIP-1279's RPCs whose schemas list the controller listener ("listeners": [broker, controller]).
MIRROR_CONTROLLER_APIS: Final[frozenset[int]] = frozenset(
    {94, 95, 96, 100, 101, 102, 103, 104, 105}
)

CONTROLLER_APIS: Final[frozenset[int]] = KAFKA_CONTROLLER_APIS | MIRROR_CONTROLLER_APIS

# Schemas whose only listener is the controller's (Kafka 4.1): never served to a broker listener.
CONTROLLER_ONLY: Final[frozenset[int]] = frozenset(
    {
        52,  # Vote
        53,  # BeginQuorumEpoch
        54,  # EndQuorumEpoch
        56,  # AlterPartition
        58,  # Envelope
        59,  # FetchSnapshot
        62,  # BrokerRegistration
        63,  # BrokerHeartbeat
        67,  # AllocateProducerIds
        70,  # ControllerRegistration
        73,  # AssignReplicasToDirs
        82,  # UpdateRaftVoter
    }
)


class ListenerApis:
    """The api keys each listener of this node serves, out of the node's handler table."""

    def __init__(self, served: Set[int], controller_listeners: Collection[str]) -> None:
        self.controller_listeners = frozenset(controller_listeners)
        self._controller = frozenset(served) & CONTROLLER_APIS
        self._broker = frozenset(served) - CONTROLLER_ONLY

    def is_controller(self, listener: str) -> bool:
        return listener in self.controller_listeners

    def keys(self, listener: str) -> frozenset[int]:
        return self._controller if self.is_controller(listener) else self._broker

    def serves(self, listener: str, api_key: int) -> bool:
        return api_key in self.keys(listener)


class NotEnabledOnListener(RequestError):
    """A request for an API its listener does not serve: the connection is closed."""

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
        listener: str,
    ) -> None:
        super().__init__(
            f"Received request api key {api_key} with version {api_version} which is not "
            f"enabled on listener {listener}",
            api_key,
            api_version,
            correlation_id,
            client_id,
        )
        self.listener = listener
