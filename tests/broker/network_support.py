"""A toy Kafka handler on `protocol.registry` and raw-socket helpers for the network tests."""

import asyncio
import dataclasses
import datetime
import struct
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import uvloop
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader as kio_entity_reader

from broker.network.server import ConnectionContext, KafkaServer, Listener, Response
from protocol.errors import RequestBodyError, UnsupportedVersionError
from protocol.headers import encode_response_header, parse_request_header
from protocol.registry import REGISTRY, DecodedRequest, body_bytes

T = TypeVar("T")

API_VERSIONS = 18
METADATA = 3
PRODUCE = 0


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def build(cls: type, **values: Any) -> Any:
    """An instance of a kio-style dataclass from a superset of field values (versions differ)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def nested(response_type: type, name: str) -> type:
    cls = getattr(__import__(response_type.__module__, fromlist=[name]), name)
    assert isinstance(cls, type)
    return cls


def response(api_key: int, version: int, corr: int, body: Any) -> Response:
    header = encode_response_header(corr, REGISTRY.spec(api_key).response_header_version(version))
    return [header, body_bytes(body)]


class ToyBroker:
    """Answers ApiVersions and Metadata (kio types, any version) and acks=0 Produce.

    ``max_versions`` makes it pretend to support fewer versions than the codec has; ``delay``
    lets a test make handlers finish out of order; ``hook`` runs before each request.
    """

    def __init__(
        self,
        *,
        max_versions: dict[int, int] | None = None,
        ranges: dict[int, tuple[int, int]] | None = None,
        topics: tuple[str, ...] = ("alpha", "beta"),
        delay: Callable[[int], float] | None = None,
        hook: Callable[[ConnectionContext, int, int], Awaitable[None]] | None = None,
    ) -> None:
        self.max_versions = max_versions or {}
        self.ranges = ranges or {}
        self.topics = topics
        self.delay = delay
        self.hook = hook
        self.address: tuple[str, int] = ("127.0.0.1", 0)
        self.seen: list[tuple[int, int, int]] = []  # (api_key, version, correlation id)

    def supported(self) -> dict[int, tuple[int, int]]:
        out = {}
        for key in (API_VERSIONS, METADATA, PRODUCE):
            spec = REGISTRY.spec(key)
            out[key] = (spec.min_version, self.max_versions.get(key, spec.max_version))
        out.update(self.ranges)
        return out

    async def handle(self, conn: ConnectionContext, frame: memoryview) -> Response | None:
        try:
            request = REGISTRY.decode_request(frame)
        except RequestBodyError as e:
            if "unexpected bytes after the message" not in str(e):
                raise
            request = decode_ignoring_trailing_bytes(frame)
        except UnsupportedVersionError as e:
            self.seen.append((e.api_key, e.api_version, e.correlation_id))
            if e.api_key == API_VERSIONS:
                return self._api_versions_unsupported(e.correlation_id)
            raise
        header = request.header
        self.seen.append((header.api_key, header.api_version, header.correlation_id))
        if self.hook is not None:
            await self.hook(conn, header.api_key, header.correlation_id)
        if self.delay is not None:
            await asyncio.sleep(self.delay(header.correlation_id))
        key, version, corr = header.api_key, header.api_version, header.correlation_id
        if key == API_VERSIONS:
            if version > self.supported()[API_VERSIONS][1]:
                return self._api_versions_unsupported(corr)
            return self._api_versions(version, corr)
        if key == METADATA:
            return self._metadata(version, corr, request.body)
        if key == PRODUCE and request.body.acks == 0:
            return None
        raise ValueError(f"toy broker does not serve api key {key}")

    def _api_versions(self, version: int, corr: int, error: ErrorCode = ErrorCode.none) -> Response:
        rtype = REGISTRY.spec(API_VERSIONS).response_type(version)
        entry = nested(rtype, "ApiVersion")
        keys = tuple(
            entry(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.supported().items())
        )
        body = build(rtype, error_code=error, api_keys=keys, throttle_time=datetime.timedelta(0))
        return response(API_VERSIONS, version, corr, body)

    def _api_versions_unsupported(self, corr: int) -> Response:
        # As Kafka does: a v0 response with UNSUPPORTED_VERSION listing the ApiVersions range.
        rtype = REGISTRY.spec(API_VERSIONS).response_type(0)
        entry = nested(rtype, "ApiVersion")
        lo, hi = self.supported()[API_VERSIONS]
        body = rtype(
            error_code=ErrorCode.unsupported_version,
            api_keys=(entry(api_key=API_VERSIONS, min_version=lo, max_version=hi),),
        )
        return response(API_VERSIONS, 0, corr, body)

    def _metadata(self, version: int, corr: int, request: Any) -> Response:
        rtype = REGISTRY.spec(METADATA).response_type(version)
        broker_t = nested(rtype, "MetadataResponseBroker")
        topic_t = nested(rtype, "MetadataResponseTopic")
        part_t = nested(rtype, "MetadataResponsePartition")
        wanted = self.topics
        if request.topics is not None:
            wanted = tuple(t.name for t in request.topics)
        topics = tuple(
            build(
                topic_t,
                error_code=ErrorCode.none,
                name=name,
                topic_id=None,
                is_internal=False,
                partitions=(
                    build(
                        part_t,
                        error_code=ErrorCode.none,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=(1,),
                        isr_nodes=(1,),
                        offline_replicas=(),
                    ),
                ),
                topic_authorized_operations=-2147483648,
            )
            for name in wanted
        )
        host, port = self.address
        body = build(
            rtype,
            throttle_time=datetime.timedelta(0),
            brokers=(build(broker_t, node_id=1, host=host, port=port, rack=None),),
            cluster_id="toy-cluster",
            controller_id=1,
            topics=topics,
            cluster_authorized_operations=-2147483648,
            error_code=ErrorCode.none,
        )
        return response(METADATA, version, corr, body)


def decode_ignoring_trailing_bytes(frame: memoryview) -> DecodedRequest:
    """librdkafka 2.16's all-topics MetadataRequest v13 carries 3 bytes after the body, which Kafka
    ignores; the registry rejects them, so the toy handler decodes without that check."""
    header, pos = parse_request_header(frame, REGISTRY.request_header_version)
    spec = REGISTRY.spec(header.api_key)
    body, _ = kio_entity_reader(spec.request_type(header.api_version))(frame, pos)
    return DecodedRequest(header, body, spec)


async def start_server(broker: ToyBroker, **kwargs: Any) -> KafkaServer:
    server = KafkaServer(
        [Listener("PLAINTEXT", "127.0.0.1", kwargs.pop("port", 0))], broker.handle, **kwargs
    )
    await server.start()
    broker.address = server.address()
    return server


def metadata_request(version: int, topics: tuple[str, ...] | None = None) -> Any:
    rtype = REGISTRY.spec(METADATA).request_type(version)
    topic_t = nested(rtype, "MetadataRequestTopic")
    entries = (
        None if topics is None else tuple(build(topic_t, name=t, topic_id=None) for t in topics)
    )
    return build(
        rtype,
        topics=entries if entries is not None or version >= 1 else (),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def api_versions_request(version: int) -> Any:
    rtype = REGISTRY.spec(API_VERSIONS).request_type(version)
    return build(rtype, client_software_name="raw", client_software_version="1")


class RawConn:
    """A plain TCP connection speaking Kafka frames by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, server: KafkaServer) -> "RawConn":
        host, port = server.address()
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    def send(self, body: Any, corr: int, version: int | None = None) -> None:
        v = int(type(body).__version__) if version is None else version
        self.writer.write(REGISTRY.encode_request(v, corr, "raw", body))

    def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)

    async def read_frame(self, timeout: float = 2.0) -> bytes:
        size_raw = await asyncio.wait_for(self.reader.readexactly(4), timeout)
        (size,) = struct.unpack(">i", size_raw)
        return await asyncio.wait_for(self.reader.readexactly(size), timeout)

    async def read_response(self, api_key: int, version: int) -> tuple[int, Any]:
        return REGISTRY.decode_response(api_key, version, await self.read_frame())

    async def is_closed(self, timeout: float = 2.0) -> bool:
        """True once the server has closed the connection (EOF or reset)."""
        try:
            data = await asyncio.wait_for(self.reader.read(1 << 20), timeout)
            while data:
                data = await asyncio.wait_for(self.reader.read(1 << 20), timeout)
        except (ConnectionError, asyncio.IncompleteReadError):
            return True
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self.writer.close()
