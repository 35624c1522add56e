"""Node-to-node requests sent by hand, as an attacker who can reach a node's ports would send them.

Stock clients cannot send the quorum, registration or coordinator-to-broker RPCs, so these are
built with the project's codec (kio types) and sent over a raw socket, optionally after SASL/PLAIN
(SaslHandshake v1 + SaslAuthenticate v2, as a Java client does). `ask` returns the decoded
response, or None when the node closed the connection without answering (Kafka's answer to an
API its listener does not serve).
"""

from __future__ import annotations

import socket
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from broker.api.error_counts import error_counts
from broker.security.principal_data import serialize_principal
from protocol.build import build
from protocol.registry import REGISTRY

METADATA_TOPIC_ID = uuid.UUID(int=1)
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_AUTHORIZATION_FAILED = 29


class RawConn:
    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask(self, key: int, version: int, data: dict[str, Any]) -> Any:
        """The response, or None: the connection was closed unanswered."""
        self._corr += 1
        body: Any = build(REGISTRY.spec(key).request_type(version), data)
        try:
            self.sock.sendall(REGISTRY.encode_request(version, self._corr, "attacker", body))
            head = self.sock.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                return None
            (size,) = struct.unpack(">i", head)
            frame = self.sock.recv(size, socket.MSG_WAITALL)
        except (ConnectionResetError, BrokenPipeError):
            return None
        corr, resp = REGISTRY.decode_response(key, version, frame)
        assert corr == self._corr
        return resp

    def sasl_plain(self, user: str, password: str) -> None:
        hs = self.ask(17, 1, {"mechanism": "PLAIN"})
        assert hs is not None and int(hs.error_code) == 0, hs
        auth = self.ask(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
        assert auth is not None and int(auth.error_code) == 0, auth


@dataclass
class Rpc:
    name: str
    key: int
    version: int
    data: dict[str, Any] = field(default_factory=dict)

    def codes(self, resp: Any) -> set[int]:
        """Every error code the response carries."""
        return set(error_counts(resp))


def _meta_partition(**fields: Any) -> dict[str, Any]:
    return {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0, **fields}]}


def embedded_create_topics(topic: str) -> bytes:
    """A CreateTopics frame (header and body, no size prefix), as a broker forwards it."""
    body: Any = build(
        REGISTRY.spec(19).request_type(7),
        {
            "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
            "timeout": 10_000,
        },
    )
    return REGISTRY.encode_request(7, 99, "forged", body)[4:]


def internal_rpcs(cluster_id: str, topic: str, topic_id: uuid.UUID) -> list[Rpc]:
    """Every node-to-node request that needs CLUSTER_ACTION (issue 26 item 2), with bodies a
    real peer could send; DescribeQuorum (DESCRIBE) last."""
    tp = {"name": topic, "partitions": [{"partition_index": 0}]}
    return [
        Rpc(
            "Vote",
            52,
            1,
            {
                "cluster_id": cluster_id,
                "topics": [
                    _meta_partition(
                        replica_epoch=1000,
                        replica_id=2,
                        last_offset_epoch=999,
                        last_offset=1 << 40,
                    )
                ],
            },
        ),
        Rpc(
            "BeginQuorumEpoch",
            53,
            0,
            {"cluster_id": cluster_id, "topics": [_meta_partition(leader_id=2, leader_epoch=1000)]},
        ),
        Rpc(
            "EndQuorumEpoch",
            54,
            0,
            {
                "cluster_id": cluster_id,
                "topics": [_meta_partition(leader_id=1, leader_epoch=1, preferred_successors=[2])],
            },
        ),
        Rpc(
            "FetchSnapshot",
            59,
            0,
            {
                "cluster_id": cluster_id,
                "replica_id": 2,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "name": "__cluster_metadata",
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": 1,
                                "snapshot_id": {"end_offset": 1, "epoch": 1},
                                "position": 0,
                            }
                        ],
                    }
                ],
            },
        ),
        Rpc(
            "Fetch of __cluster_metadata",
            1,
            13,
            {
                "cluster_id": cluster_id,
                "replica_id": 2,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic_id": METADATA_TOPIC_ID,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
            },
        ),
        Rpc(
            "follower Fetch",
            1,
            13,
            {
                "replica_id": 2,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
            },
        ),
        Rpc(
            "BrokerRegistration",
            62,
            4,
            {
                "broker_id": 7,
                "cluster_id": cluster_id,
                "incarnation_id": uuid.uuid4(),
                "listeners": [
                    {"name": "PLAINTEXT", "host": "10.9.9.9", "port": 9092, "security_protocol": 0}
                ],
                "features": [],
                "rack": None,
            },
        ),
        Rpc("BrokerHeartbeat", 63, 1, {"broker_id": 1, "broker_epoch": 0, "want_fence": True}),
        Rpc(
            "AlterPartition",
            56,
            3,
            {
                "broker_id": 1,
                "broker_epoch": 0,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "leader_epoch": 0,
                                "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 0}],
                                "partition_epoch": 0,
                            }
                        ],
                    }
                ],
            },
        ),
        Rpc(
            "Envelope claiming User:admin",
            58,
            0,
            {
                "request_data": embedded_create_topics("forged-by-envelope"),
                "request_principal": serialize_principal("User:admin"),
                "client_host_address": bytes([127, 0, 0, 1]),
            },
        ),
        Rpc("AllocateProducerIds", 67, 0, {"broker_id": 1, "broker_epoch": 0}),
        Rpc(
            "WriteTxnMarkers",
            27,
            1,
            {
                "markers": [
                    {
                        "producer_id": 1,
                        "producer_epoch": 0,
                        "transaction_result": True,
                        "topics": [{"name": topic, "partition_indexes": [0]}],
                        "coordinator_epoch": 0,
                    }
                ]
            },
        ),
        *(
            Rpc(
                name,
                key,
                0,
                {
                    "group_id": "g",
                    "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, **extra}]}],
                },
            )
            for name, key, extra in (
                ("InitializeShareGroupState", 83, {"state_epoch": 1, "start_offset": 0}),
                ("ReadShareGroupState", 84, {"leader_epoch": 0}),
                (
                    "WriteShareGroupState",
                    85,
                    {"state_epoch": 1, "leader_epoch": 0, "start_offset": 0, "state_batches": []},
                ),
                ("DeleteShareGroupState", 86, {}),
                ("ReadShareGroupStateSummary", 87, {"leader_epoch": 0}),
            )
        ),
        Rpc(
            "BumpLeaderEpochs",
            105,
            0,
            {
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [{"partition_index": 0, "min_leader_epoch": 50}],
                    }
                ]
            },
        ),
        Rpc(
            "ReadMirrorStates",
            100,
            0,
            {"mirror_name": "m", "topics": [tp]},
        ),
        Rpc(
            "WriteMirrorStates",
            101,
            0,
            {
                "mirror_name": "m",
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "state": 1}]}],
            },
        ),
        Rpc("DescribeQuorum", 55, 1, {"topics": [_meta_partition()]}),
    ]


CONTROLLER_ONLY = {52, 53, 54, 56, 58, 59, 62, 63, 67}
BROKER_ONLY = {27, 83, 84, 85, 86, 87}
