"""The admin client of kafka-topics.sh, kafka-get-offsets.sh, kafka-log-dirs.sh and
kafka-delete-records.sh: a bootstrap connection that waits for the cluster as Kafka's Admin does
(until ``default.api.timeout.ms``, then Kafka's "Timed out waiting for a node assignment"), one
connection per broker on demand, and the cluster's topics, partitions and brokers.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from broker.cli.admin import CommandError, Session, UsageError, code, servers
from broker.cli.groups_model import ERRORS

METADATA, DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 3, 60, 75
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
DEFAULT_API_TIMEOUT_MS: Final = 60_000

# Kafka's Errors beyond the group ones: exception class and default message
TOPIC_ERRORS: Final[dict[int, tuple[str, str]]] = {
    1: ("OffsetOutOfRangeException",
        "The requested offset is not within the range of offsets maintained by the server."),
    6: ("NotLeaderOrFollowerException",
        "For requests intended only for the leader, this error indicates that the broker is not "
        "the current leader. For requests intended for any replica, this error indicates that "
        "the broker is not a replica of the topic partition."),
    17: ("InvalidTopicException",
         "The request attempted to perform an operation on an invalid topic."),
    31: ("ClusterAuthorizationException", "Cluster authorization failed."),
    36: ("TopicExistsException", "Topic with this name already exists."),
    37: ("InvalidPartitionsException", "Number of partitions is below 1."),
    38: ("InvalidReplicationFactorException",
         "Replication factor is below 1 or larger than the number of available brokers."),
    39: ("InvalidReplicaAssignmentException", "Replica assignment is invalid."),
    40: ("InvalidConfigurationException", "Configuration is invalid."),
    41: ("NotControllerException", "This is not the correct controller for this cluster."),
    44: ("PolicyViolationException", "Request parameters do not satisfy the configured policy."),
    57: ("LogDirNotFoundException",
          "The user-specified log directory is not found in the broker config."),
    73: ("TopicDeletionDisabledException", "Topic deletion is disabled."),
    89: ("ThrottlingQuotaExceededException", "The throttling quota has been exceeded."),
    100: ("UnknownTopicIdException", "This server does not host this topic ID."),
}  # fmt: skip


def error_info(error: int) -> tuple[str, str]:
    return TOPIC_ERRORS.get(error) or ERRORS.get(error) or ("ApiException", f"error {error}")


def message(error: int, text: str | None = None) -> str:
    """What Java's ``getMessage`` gives for the exception of ``error``."""
    return text or error_info(error)[1]


def exception(error: int, text: str | None = None) -> str:
    """How Java prints that exception: class and message."""
    return f"org.apache.kafka.common.errors.{error_info(error)[0]}: {message(error, text)}"


class ApiError(CommandError):
    """The cluster answered with an error code."""

    def __init__(self, error: int, text: str | None = None) -> None:
        super().__init__(message(error, text))
        self.error, self.text = error, text


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] | None  # None: the broker did not say (Metadata)
    last_known_elr: tuple[int, ...] | None
    offline: tuple[int, ...]
    error: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None
    internal: bool
    partitions: tuple[PartitionInfo, ...]


class TopicFilter:
    """Kafka's IncludeList: a regex matching the whole name (',' means '|')."""

    def __init__(self, raw: str) -> None:
        text = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|")))
        self.text = text.replace(" ", "")
        try:
            self.pattern = re.compile(self.text)
        except re.error:
            raise CommandError(f"{self.text} is an invalid regex.") from None

    def allows(self, topic: str) -> bool:
        return self.pattern.fullmatch(topic) is not None


class KafkaAdmin:
    """The connections of one tool run."""

    def __init__(self, boot: Session, timeout_ms: int, client_id: str) -> None:
        self.boot = boot
        self.timeout_ms = timeout_ms
        self.client_id = client_id
        self.sessions: dict[int, Session] = {}
        self.brokers: dict[int, tuple[str, int]] = {}

    @classmethod
    async def open(
        cls, bootstrap: str, props: Mapping[str, str], client_id: str, call: str
    ) -> KafkaAdmin:
        """Connect to the first bootstrap server that answers, trying again until
        ``default.api.timeout.ms`` (the cluster may still be starting, as scripts expect)."""
        try:
            addresses = servers(bootstrap)
        except UsageError as e:
            raise CommandError(str(e)) from None
        timeout_ms = _int_prop(props, "default.api.timeout.ms", DEFAULT_API_TIMEOUT_MS)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                boot = await Session.open(addresses, props, client_id, "the cluster")
                return cls(boot, timeout_ms, client_id)
            except CommandError as e:
                if "authentication:" in str(e):
                    raise
            if time.monotonic() >= deadline:
                raise CommandError(f"Timed out waiting for a node assignment. Call: {call}")
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        self.boot.close()
        for s in self.sessions.values():
            s.close()

    async def call(self, api_key: int, fields: dict[str, Any], node: int | None = None) -> Any:
        session = self.boot if node is None else await self.session(node)
        try:
            return await asyncio.wait_for(session.call(api_key, fields), self.timeout_ms / 1000)
        except TimeoutError:
            raise CommandError(
                f"Timed out waiting for a node assignment. Call: {self.client_id}"
            ) from None

    def serves(self, api_key: int) -> bool:
        return self.boot.conn.server_versions.get(api_key) is not None

    async def session(self, node: int) -> Session:
        if node not in self.sessions:
            if node not in self.brokers:
                await self.metadata([])
            if node not in self.brokers:
                raise CommandError(f"Broker {node} is not in the cluster's metadata")
            self.sessions[node] = await Session.open(
                [self.brokers[node]], self.boot.props, self.client_id, f"broker {node}"
            )
        return self.sessions[node]

    async def metadata(self, topics: Sequence[str] | None) -> dict[str, TopicInfo | None]:
        """Each topic asked for (None: every topic) by name; None for one the cluster does not
        know. Learns the brokers' addresses too."""
        resp = await self.call(
            METADATA,
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers}
        out: dict[str, TopicInfo | None] = {}
        for t in resp.topics:
            err = code(t.error_code)
            if err == UNKNOWN_TOPIC_OR_PARTITION:
                out[str(t.name)] = None
                continue
            if err:
                raise ApiError(err)
            out[str(t.name)] = TopicInfo(
                str(t.name),
                _topic_id(getattr(t, "topic_id", None)),
                bool(t.is_internal),
                tuple(
                    PartitionInfo(
                        int(p.partition_index),
                        int(p.leader_id),
                        int(getattr(p, "leader_epoch", -1)),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                        None,
                        None,
                        tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                        code(p.error_code),
                    )
                    for p in t.partitions
                ),
            )
        return out

    async def describe_topics(self, names: Sequence[str], limit: int) -> dict[str, TopicInfo]:
        """Kafka's describeTopics: DescribeTopicPartitions pages (with ELR) where the broker
        serves it, Metadata otherwise. A topic gone meanwhile fails as Kafka's admin does."""
        if not names:
            return {}
        if not self.serves(DESCRIBE_TOPIC_PARTITIONS):
            found = await self.metadata(names)
            out: dict[str, TopicInfo] = {}
            for n in names:
                info = found.get(n)
                if info is None:
                    raise ApiError(UNKNOWN_TOPIC_OR_PARTITION)
                out[n] = info
            return out
        parts: dict[str, list[PartitionInfo]] = {n: [] for n in names}
        meta: dict[str, tuple[uuid.UUID | None, bool]] = {}
        cursor: dict[str, Any] | None = None
        for _ in range(100_000):  # one page per `limit` partitions
            resp = await self.call(
                DESCRIBE_TOPIC_PARTITIONS,
                {
                    "topics": [{"name": n} for n in names],
                    "response_partition_limit": limit,
                    "cursor": cursor,
                },
            )
            for t in resp.topics:
                err = code(t.error_code)
                if err:
                    raise ApiError(err)
                meta[str(t.name)] = (_topic_id(t.topic_id), bool(t.is_internal))
                parts[str(t.name)].extend(_partition(p) for p in t.partitions)
            nc = resp.next_cursor
            if nc is None:
                break
            cursor = {"topic_name": str(nc.topic_name), "partition_index": int(nc.partition_index)}
        return {
            n: TopicInfo(n, meta[n][0], meta[n][1], tuple(parts[n])) for n in names if n in meta
        }

    async def live_brokers(self) -> set[int]:
        """The brokers DescribeCluster lists (Metadata's where it is not served)."""
        if not self.serves(DESCRIBE_CLUSTER):
            await self.metadata([])
            return set(self.brokers)
        resp = await self.call(
            DESCRIBE_CLUSTER,
            {"include_cluster_authorized_operations": False, "endpoint_type": 1},
        )
        if code(resp.error_code):
            raise ApiError(code(resp.error_code), resp.error_message)
        return {int(b.broker_id) for b in resp.brokers}


def _partition(p: Any) -> PartitionInfo:
    elr, lk = p.eligible_leader_replicas, p.last_known_elr
    return PartitionInfo(
        int(p.partition_index),
        int(p.leader_id),
        int(p.leader_epoch),
        tuple(int(r) for r in p.replica_nodes),
        tuple(int(r) for r in p.isr_nodes),
        None if elr is None else tuple(int(r) for r in elr),
        None if lk is None else tuple(int(r) for r in lk),
        tuple(int(r) for r in p.offline_replicas),
        code(p.error_code),
    )


def _topic_id(value: Any) -> uuid.UUID | None:
    if value is None or value == uuid.UUID(int=0):
        return None
    return value if isinstance(value, uuid.UUID) else None


def _int_prop(props: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(props.get(key, default))
    except ValueError:
        raise CommandError(f"Invalid value {props[key]} for configuration {key}") from None


def kafka_uuid(value: uuid.UUID | None) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    raw = (value or uuid.UUID(int=0)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
