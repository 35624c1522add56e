"""Node-to-node requests sent by hand, as an attacker who can reach a node's ports would send them.

Stock clients cannot send the quorum, registration or coordinator-to-broker RPCs, so these are
built with the project's codec (kio types) and sent over a raw socket, optionally over TLS
(`tls_context`) and after SASL (SaslHandshake v1 + SaslAuthenticate v2 with PLAIN or SCRAM, as a
Java client does). `ask` returns the decoded response, or None when the node closed the
connection without answering (Kafka's answer to an API its listener does not serve, and to any
request but ApiVersions/SaslHandshake before SASL). `assert_refused` holds what Kafka answers
each of them, and each data/admin request of `data_rpcs`, from a principal without ACLs.
"""

from __future__ import annotations

import socket
import ssl
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.api.error_counts import error_counts
from broker.security import scram
from broker.security.principal_data import serialize_principal
from protocol.build import build
from protocol.records.builder import Record, build_batch
from protocol.registry import REGISTRY

METADATA_TOPIC_ID = uuid.UUID(int=1)
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
UNKNOWN_TOPIC_ID = 100


def tls_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """A client context trusting ``ca``, presenting ``cert``/``key`` when given (mutual TLS)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key) if key else None)
    return ctx


class RawConn:
    def __init__(self, port: int, timeout: float = 15.0, tls: ssl.SSLContext | None = None) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
            except BaseException:
                sock.close()
                raise
        self.sock = sock
        self._corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv(self, size: int) -> bytes:
        """``size`` bytes, fewer when the peer closed first (an SSL socket takes no MSG_WAITALL)."""
        out = bytearray()
        while len(out) < size:
            chunk = self.sock.recv(size - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def send_raw(self, key: int, version: int, data: dict[str, Any]) -> None:
        self._corr += 1
        body: Any = build(REGISTRY.spec(key).request_type(version), data)
        self.sock.sendall(REGISTRY.encode_request(version, self._corr, "attacker", body))

    def ask(self, key: int, version: int, data: dict[str, Any]) -> Any:
        """The response, or None: the connection was closed unanswered."""
        try:
            self.send_raw(key, version, data)
            head = self._recv(4)
            if len(head) < 4:
                return None
            (size,) = struct.unpack(">i", head)
            frame = self._recv(size)
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return None  # an SSLError here is the server's alert or its closing mid-record
        if len(frame) < size:
            return None
        corr, resp = REGISTRY.decode_response(key, version, frame)
        assert corr == self._corr
        return resp

    def sasl_plain(self, user: str, password: str) -> None:
        hs = self.ask(17, 1, {"mechanism": "PLAIN"})
        assert hs is not None and int(hs.error_code) == 0, hs
        auth = self.ask(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
        assert auth is not None and int(auth.error_code) == 0, auth

    def sasl_scram(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
        hs = self.ask(17, 1, {"mechanism": mechanism})
        assert hs is not None and int(hs.error_code) == 0, hs
        client = scram.ScramClient(scram.MECHANISMS[mechanism], user, password)
        first = self.ask(36, 2, {"auth_bytes": client.first()})
        assert first is not None and int(first.error_code) == 0, first
        final = self.ask(36, 2, {"auth_bytes": client.final(bytes(first.auth_bytes))})
        assert final is not None and int(final.error_code) == 0, final
        client.verify(bytes(final.auth_bytes))


@dataclass
class Rpc:
    name: str
    key: int
    version: int
    data: dict[str, Any] = field(default_factory=dict)
    # for data/admin requests: the one code Kafka answers on a broker / controller listener
    # (None: that listener does not serve the API, so the connection closes)
    broker_code: int | None = None
    controller_code: int | None = None

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


def _batch() -> bytes:
    return build_batch([Record(key=b"k", value=b"forged")])


def data_rpcs(topic: str, group: str) -> list[Rpc]:
    """Data and admin requests on ``topic`` (which exists) and ``group``, each with the code
    Kafka answers a principal that has no ACL at all: per topic, group or resource, or the
    request's own error code for the cluster-wide ones."""
    topic_config = {"resource_type": 2, "resource_name": topic}
    return [
        Rpc(
            "Produce",
            0,
            9,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": _batch()}]}
                ],
            },
            TOPIC_AUTHORIZATION_FAILED,
            None,
        ),
        Rpc(
            "Fetch",
            1,
            12,
            {
                "replica_id": -1,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic": topic,
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
            TOPIC_AUTHORIZATION_FAILED,
            CLUSTER_AUTHORIZATION_FAILED,  # a controller serves the metadata log only
        ),
        Rpc(
            "Metadata",
            3,
            12,
            {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
            TOPIC_AUTHORIZATION_FAILED,
            None,
        ),
        Rpc(
            "FindCoordinator (group)",
            10,
            4,
            {"key_type": 0, "coordinator_keys": [group]},
            GROUP_AUTHORIZATION_FAILED,
            None,
        ),
        Rpc(
            "CreateTopics",
            19,
            7,
            {
                "topics": [{"name": "forged-topic", "num_partitions": 1, "replication_factor": 3}],
                "timeout": 10_000,
            },
            TOPIC_AUTHORIZATION_FAILED,
            TOPIC_AUTHORIZATION_FAILED,
        ),
        Rpc(
            "DeleteTopics",
            20,
            6,
            {"topics": [{"name": topic}], "timeout": 10_000},
            TOPIC_AUTHORIZATION_FAILED,
            TOPIC_AUTHORIZATION_FAILED,
        ),
        Rpc(
            "DescribeAcls",
            29,
            3,
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },
            CLUSTER_AUTHORIZATION_FAILED,
            CLUSTER_AUTHORIZATION_FAILED,
        ),
        Rpc(
            "CreateAcls",
            30,
            3,
            {
                "creations": [
                    {
                        "resource_type": 2,
                        "resource_name": topic,
                        "resource_pattern_type": 3,
                        "principal": "User:bob",
                        "host": "*",
                        "operation": 2,
                        "permission_type": 3,
                    }
                ]
            },
            CLUSTER_AUTHORIZATION_FAILED,
            CLUSTER_AUTHORIZATION_FAILED,
        ),
        Rpc(
            "DescribeConfigs (topic)",
            32,
            4,
            {"resources": [{**topic_config, "configuration_keys": None}]},
            TOPIC_AUTHORIZATION_FAILED,
            TOPIC_AUTHORIZATION_FAILED,
        ),
        Rpc(
            "AlterConfigs (topic)",
            33,
            2,
            {
                "resources": [
                    {**topic_config, "configs": [{"name": "retention.ms", "value": "1"}]}
                ],
                "validate_only": False,
            },
            TOPIC_AUTHORIZATION_FAILED,
            TOPIC_AUTHORIZATION_FAILED,
        ),
        Rpc(
            "IncrementalAlterConfigs (topic)",
            44,
            1,
            {
                "resources": [
                    {
                        **topic_config,
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
                    }
                ],
                "validate_only": False,
            },
            TOPIC_AUTHORIZATION_FAILED,
            TOPIC_AUTHORIZATION_FAILED,
        ),
        Rpc(
            "DescribeUserScramCredentials",
            50,
            0,
            {"users": None},
            CLUSTER_AUTHORIZATION_FAILED,
            None,
        ),
        Rpc(
            "AlterUserScramCredentials",
            51,
            0,
            {
                "deletions": [],
                "upsertions": [
                    {
                        "name": "bob",
                        "mechanism": 2,
                        "iterations": 8192,
                        "salt": b"s" * 16,
                        "salted_password": b"p" * 64,
                    }
                ],
            },
            CLUSTER_AUTHORIZATION_FAILED,
            CLUSTER_AUTHORIZATION_FAILED,
        ),
    ]


def assert_refused(resp: Any, rpc: Rpc, controller: bool, where: str) -> None:
    """``resp`` (None: the connection closed unanswered) is what Kafka answers ``rpc`` from a
    principal without ACLs on a controller or broker listener."""
    if rpc.broker_code is not None or rpc.controller_code is not None:
        want = rpc.controller_code if controller else rpc.broker_code
        if want is None:
            assert resp is None, f"{where}: answered {resp}, expected the connection to close"
            return
        assert resp is not None, f"{where}: the connection closed"
        # the refusal per topic, group or resource, beside a top-level NONE where there is one
        assert rpc.codes(resp) - {0} == {want}, f"{where}: {resp}"
        return
    served = rpc.key not in (BROKER_ONLY if controller else CONTROLLER_ONLY)
    if not served:
        assert resp is None, f"{where}: answered {resp}, expected the connection to close"
        return
    assert resp is not None, f"{where}: the connection closed"
    if rpc.key == 1 and not controller:
        # a follower's Fetch on a broker listener: each partition refused, as Kafka answers it
        # (the metadata log is no topic there at all); never any records
        parts = {int(p.error_code) for t in resp.responses for p in t.partitions}
        assert int(resp.error_code) == 0 and parts, where
        assert parts <= {TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID}, f"{where}: {parts}"
        assert all(not p.records for t in resp.responses for p in t.partitions), where
        if rpc.name == "follower Fetch":
            assert parts == {TOPIC_AUTHORIZATION_FAILED}, f"{where}: {parts}"
        return
    assert rpc.codes(resp) == {CLUSTER_AUTHORIZATION_FAILED}, f"{where}: {resp}"
