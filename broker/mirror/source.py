"""A small admin/metadata client for a mirror's source cluster (any Kafka-protocol server).

It talks to whatever the source supports: every request is sent at the highest version both
sides know, and optional APIs (DescribeConfigs) are skipped with a warning when missing.
Connections to individual source brokers are pooled by (node id, client id) for the fetchers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from protocol.build import build
from protocol.errors import ProtocolError
from protocol.registry import REGISTRY, body_bytes, decode_body

from ..network.client import ReconnectingClient
from ..network.errors import NetworkError, ProtocolViolationError, UnsupportedVersionError
from ..network.stats import NetworkStats
from ..security.client import client_security

log = logging.getLogger(__name__)

METADATA: Final = 3
LIST_OFFSETS: Final = 2
OFFSET_FOR_LEADER_EPOCH: Final = 23
DESCRIBE_CONFIGS: Final = 32
DESCRIBE_MIRRORS: Final = 99
TOPIC_RESOURCE: Final = 2
DYNAMIC_TOPIC_CONFIG: Final = 1
EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
READ_COMMITTED: Final = 1


class SourceError(Exception):
    """The source answered with an error code (``code``) or could not be reached (code -1)."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class SourcePartition:
    leader_id: int  # -1: no leader right now
    leader_epoch: int  # -1: the source is too old to report it
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class SourceTopic:
    name: str
    topic_id: uuid.UUID | None  # None: the source predates topic ids
    partitions: dict[int, SourcePartition] = field(default_factory=dict)
    is_internal: bool = False


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` -> addresses; IPv6 hosts may be bracketed."""
    out: list[tuple[str, int]] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bad bootstrap.servers entry {item!r} (expected host:port)")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("bootstrap.servers is empty")
    return out


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


class SourceClient:
    def __init__(
        self,
        config: Mapping[str, str],
        client_id: str,
        *,
        request_timeout_ms: int = 30_000,
    ) -> None:
        if "bootstrap.servers" not in config:
            raise ValueError("mirror config lacks bootstrap.servers")
        # security.protocol, ssl.*, sasl.*: SecurityConfigError (a ValueError) names a bad key
        self.security = client_security(config)
        self.bootstrap = parse_bootstrap(config["bootstrap.servers"])
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._backoff_ms = int(config.get("reconnect.backoff.ms", "50"))
        self._backoff_max_ms = int(config.get("reconnect.backoff.max.ms", "1000"))
        self._brokers: dict[int, tuple[str, int]] = {}
        self._bootstrap_clients: dict[tuple[str, int], ReconnectingClient] = {}
        self._pool: dict[tuple[int, str], ReconnectingClient] = {}
        self._preferred: ReconnectingClient | None = None
        self._closed = False
        self.skipped: set[str] = set()  # optional APIs the source lacks (for logs/metrics)

    # -- connections ---------------------------------------------------------------------
    def _client(
        self, host: str, port: int, client_id: str, stats: NetworkStats | None = None
    ) -> ReconnectingClient:
        return ReconnectingClient(
            host,
            port,
            client_id,
            request_timeout_ms=self.request_timeout_ms,
            reconnect_backoff_ms=self._backoff_ms,
            reconnect_backoff_max_ms=self._backoff_max_ms,
            ssl_context=self.security.ssl_context,
            authenticate=self.security.authenticate if self.security.uses_sasl else None,
            stats=stats,
        )

    def connection_for(
        self, node_id: int, client_id: str | None = None, stats: NetworkStats | None = None
    ) -> ReconnectingClient:
        """A pooled client for one source broker (its address from the last Metadata); a new
        one counts its connections in ``stats`` (a fetcher's network metrics)."""
        if self._closed:
            raise SourceError("source client is closed")
        cid = client_id or self.client_id
        address = self._brokers.get(node_id)
        if address is None:
            raise SourceError(f"source broker {node_id} is unknown (refresh metadata first)")
        key = (node_id, cid)
        client = self._pool.get(key)
        if client is not None and (client.host, client.port) != address:
            client.close()  # the broker moved: reconnect at its new address
            client = None
        if client is None:
            client = self._client(address[0], address[1], cid, stats)
            self._pool[key] = client
        return client

    def candidates(self) -> list[ReconnectingClient]:
        out: list[ReconnectingClient] = []
        if self._preferred is not None:
            out.append(self._preferred)
        for address in self.bootstrap:
            client = self._bootstrap_clients.get(address)
            if client is None:
                client = self._client(address[0], address[1], self.client_id)
                self._bootstrap_clients[address] = client
            if client is not self._preferred:
                out.append(client)
        return out

    async def send_any(self, api_key: int, fields: dict[str, Any]) -> tuple[int, Any]:
        """Send to the first bootstrap broker that answers."""
        if self._closed:
            raise SourceError("source client is closed")
        last: Exception | None = None
        for client in self.candidates():
            try:
                result = await self.send(client, api_key, fields)
            except NetworkError as e:
                if isinstance(e, UnsupportedVersionError):
                    raise
                last = e
                continue
            self._preferred = client
            return result  # type: ignore[no-any-return]
        raise SourceError(f"no source broker of {self.bootstrap_text()} answered: {last}")

    def bootstrap_text(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.bootstrap)

    @staticmethod
    async def send(client: ReconnectingClient, api_key: int, fields: dict[str, Any]) -> Any:
        conn = await client.connection()
        version = conn.version_for(api_key)
        spec = REGISTRY.spec(api_key)
        body: Any = build(spec.request_type(version), fields)
        raw = await conn.send_raw(api_key, version, body_bytes(body))
        # Lenient about trailing bytes, as Kafka's clients are: librdkafka's mock cluster
        # appends one to its Metadata responses.
        try:
            return version, decode_body(spec.response_type(version), raw, 0, strict=False)
        except ProtocolError as e:
            raise ProtocolViolationError(
                f"cannot decode {spec.name} v{version} response from {conn.host}:{conn.port}: {e}"
            ) from e

    async def _to_leader(
        self, topic: str, partition: int, api_key: int, fields: dict[str, Any]
    ) -> Any:
        leader = await self.leader_of(topic, partition)
        try:
            _, resp = await self.send(self.connection_for(leader), api_key, fields)
        except NetworkError as e:
            if isinstance(e, UnsupportedVersionError):
                raise
            raise SourceError(f"source broker {leader}: {e}") from e
        return resp

    # -- metadata ------------------------------------------------------------------------
    async def api_versions(self) -> dict[int, tuple[int, int]]:
        last: Exception | None = None
        for client in self.candidates():
            try:
                conn = await client.connection()
            except NetworkError as e:
                last = e
                continue
            self._preferred = client
            return dict(conn.server_versions)
        raise SourceError(f"no source broker of {self.bootstrap_text()} answered: {last}")

    async def metadata(self, names: Sequence[str] | None) -> tuple[int, Any]:
        topics = None if names is None else [{"name": n} for n in names]
        version, resp = await self.send_any(
            METADATA,
            {
                "topics": topics,
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
        self._brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers}
        return version, resp

    async def cluster_id(self) -> str | None:
        _, resp = await self.metadata([])
        cid = getattr(resp, "cluster_id", None)
        return str(cid) if cid else None

    async def brokers(self) -> dict[int, tuple[str, int]]:
        await self.metadata([])
        return dict(self._brokers)

    async def topics(self, names: Sequence[str] | None = None) -> dict[str, SourceTopic]:
        """Topics that exist at the source (all when ``names`` is None); missing ones are left out."""
        if names is not None and not names:
            return {}
        _, resp = await self.metadata(names)
        out: dict[str, SourceTopic] = {}
        for t in resp.topics:
            if _code(t.error_code) != 0 or not t.name:
                continue
            tid = getattr(t, "topic_id", None)
            parts = {
                int(p.partition_index): SourcePartition(
                    int(p.leader_id), int(getattr(p, "leader_epoch", -1)), _code(p.error_code)
                )
                for p in t.partitions
            }
            out[str(t.name)] = SourceTopic(
                str(t.name),
                tid if isinstance(tid, uuid.UUID) and tid.int else None,
                parts,
                bool(getattr(t, "is_internal", False)),
            )
        return out

    async def leader_of(self, topic: str, partition: int) -> int:
        found = (await self.topics([topic])).get(topic)
        if found is None:
            raise SourceError(f"topic {topic} does not exist at the source", 3)
        p = found.partitions.get(partition)
        if p is None:
            raise SourceError(f"{topic}-{partition} does not exist at the source", 3)
        if p.leader_id < 0:
            raise SourceError(f"{topic}-{partition} has no leader at the source", 5)
        return p.leader_id

    async def topic_configs(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        """Each topic's non-default (dynamic topic) configs; {} when DescribeConfigs is missing."""
        if not names:
            return {}
        try:
            version, resp = await self.send_any(
                DESCRIBE_CONFIGS,
                {
                    "resources": [
                        {
                            "resource_type": TOPIC_RESOURCE,
                            "resource_name": n,
                            "configuration_keys": None,
                        }
                        for n in names
                    ],
                    "include_synonyms": False,
                    "include_documentation": False,
                },
            )
        except UnsupportedVersionError as e:
            if "DescribeConfigs" not in self.skipped:
                log.warning("mirror source lacks DescribeConfigs, topic configs not synced: %s", e)
            self.skipped.add("DescribeConfigs")
            return {}
        out: dict[str, dict[str, str]] = {}
        for r in resp.results:
            if _code(r.error_code) != 0:
                continue
            configs: dict[str, str] = {}
            for c in r.configs:
                if c.value is None:
                    continue
                if version >= 1:
                    if (
                        int(getattr(c.config_source, "value", c.config_source))
                        != DYNAMIC_TOPIC_CONFIG
                    ):
                        continue
                elif getattr(c, "is_default", False):
                    continue
                configs[str(c.name)] = str(c.value)
            out[str(r.resource_name)] = configs
        return out

    # -- offsets -------------------------------------------------------------------------
    async def list_offsets(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        *,
        current_leader_epoch: int = -1,
        isolation_level: int = READ_COMMITTED,
    ) -> tuple[int, int]:
        """(offset, leader epoch) at ``timestamp`` (-2 earliest, -1 latest = LSO when committed)."""
        resp = await self._to_leader(
            topic,
            partition,
            LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "current_leader_epoch": current_leader_epoch,
                                "timestamp": timestamp,
                            }
                        ],
                    }
                ],
            },
        )
        for t in resp.topics:
            for p in t.partitions:
                if int(p.partition_index) != partition:
                    continue
                code = _code(p.error_code)
                if code:
                    raise SourceError(f"ListOffsets {topic}-{partition}: error {code}", code)
                return int(p.offset), int(getattr(p, "leader_epoch", -1))
        raise SourceError(f"ListOffsets: no answer for {topic}-{partition}")

    async def offset_for_leader_epoch(
        self, topic: str, partition: int, leader_epoch: int, *, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """(epoch, end offset) the source holds for ``leader_epoch``; (-1, -1) when unknown."""
        resp = await self._to_leader(
            topic,
            partition,
            OFFSET_FOR_LEADER_EPOCH,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "current_leader_epoch": current_leader_epoch,
                                "leader_epoch": leader_epoch,
                            }
                        ],
                    }
                ],
            },
        )
        for t in resp.topics:
            for p in t.partitions:
                if int(p.partition) != partition:
                    continue
                code = _code(p.error_code)
                if code:
                    raise SourceError(
                        f"OffsetForLeaderEpoch {topic}-{partition}: error {code}", code
                    )
                return int(getattr(p, "leader_epoch", -1)), int(p.end_offset)
        raise SourceError(f"OffsetForLeaderEpoch: no answer for {topic}-{partition}")

    # -- lifecycle -----------------------------------------------------------------------
    async def last_mirrored_epochs(self, mirror: str) -> dict[tuple[str, int], int] | None:
        """The source's own last mirrored epochs for ``mirror`` (failback, KIP-1279 PREPARING).

        Every broker of the source is asked and the answers merged: a kmirror source of several
        nodes answers DescribeMirrors for the partitions each node leads (so does
        kafka-mirrors.sh --describe). Asking one node left the others' partitions unconfirmed,
        and failback truncated them to nothing and copied them again. A broker that cannot be
        reached fails the call (SourceError: PREPARING retries) for the same reason.

        None when the source cannot say (no DescribeMirrors, or no such mirror there): the
        caller then treats every local epoch as unconfirmed.
        """
        body = {"mirror_names": [mirror], "include_authorized_operations": False}
        answers: list[Any] = []
        for node_id in sorted(await self.brokers()):
            try:
                _version, resp = await self.send(
                    self.connection_for(node_id), DESCRIBE_MIRRORS, body
                )
            except UnsupportedVersionError:
                continue  # that broker predates the API: it mirrors nothing
            except NetworkError as e:
                raise SourceError(f"DescribeMirrors to source broker {node_id}: {e}") from e
            answers.append(resp)
        if not answers:
            self.skipped.add("DescribeMirrors")
            return None
        out: dict[tuple[str, int], int] = {}
        found = False
        for resp in answers:
            for m in resp.mirrors:
                if _code(m.error_code) != 0 or m.mirror_name != mirror:
                    continue
                found = True
                for t in m.topics:
                    for p in t.partitions:
                        key = (str(t.topic_name), int(p.partition_index))
                        if p.last_mirror_epoch >= 0:
                            out[key] = max(out.get(key, -1), int(p.last_mirror_epoch))
        return out if found else None

    async def close(self) -> None:
        self._closed = True
        clients = [*self._bootstrap_clients.values(), *self._pool.values()]
        self._bootstrap_clients.clear()
        self._pool.clear()
        for c in clients:
            c.close()
        for c in clients:
            await c.wait_closed()
