"""Outgoing Kafka connections: inter-broker traffic, mirror fetchers and the CLI.

`ClientConnection` is one TCP connection: it negotiates versions with ApiVersions on connect,
pipelines requests (responses are matched by correlation id), and closes itself when a request
times out, because a Kafka stream cannot be resynchronised after a response goes missing.
`ReconnectingClient` wraps it with Kafka's exponential reconnect backoff.

Typed requests go through `send` (kio-style bodies, responses decoded with the registry); the
Fetch hot path uses `send_raw`, which returns the response body undecoded so the caller can run
its own zero-copy decoder over it.

Security is injected: an ``ssl_context`` makes the connection TLS, and an ``authenticate`` step
(SASL, built by broker.security.client) runs right after ApiVersions.
"""

import asyncio
import contextlib
import dataclasses
import logging
import random
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any, Final, cast

from protocol.errors import FrameError, ProtocolError
from protocol.headers import encode_request_header, parse_response_header
from protocol.registry import REGISTRY, Registry, body_bytes, decode_body

from .errors import (
    ConnectError,
    ConnectionClosedError,
    NetworkError,
    ProtocolViolationError,
    RequestTimeoutError,
    UnsupportedVersionError,
)
from .framer import FrameReader
from .stats import NetworkStats

log = logging.getLogger(__name__)

API_VERSIONS: Final = 18
UNSUPPORTED_VERSION: Final = 35
FIRST_API_VERSIONS_VERSION: Final = 3  # flexible, carries the client software name/version
SOFTWARE_NAME: Final = "kmirror"
DEFAULT_MAX_RESPONSE_BYTES: Final = 1 << 30
MIN_SETUP_MS: Final = 1000  # the least time a connection's ApiVersions exchange is given

_SIZE: Final = struct.Struct(">i")
_INT16: Final = struct.Struct(">h")

# Runs on a new connection after ApiVersions, before any other request (SASL, in
# broker.security.client); an exception fails the connect.
Authenticator = Callable[["ClientConnection"], Awaitable[None]]
# Told of every failed (re)connect attempt (None: of a successful one after failures).
ConnectObserver = Callable[[NetworkError | None], None]


def _software_version() -> str:
    try:
        return metadata.version("kmirror")
    except metadata.PackageNotFoundError:
        return "0.0.0"


class _Pending:
    __slots__ = ("api_key", "future", "raw", "timeout_ms", "timer", "version")

    def __init__(
        self,
        api_key: int,
        version: int,
        raw: bool,
        future: "asyncio.Future[Any]",
        timer: asyncio.TimerHandle,
        timeout_ms: int,
    ) -> None:
        self.api_key = api_key
        self.timeout_ms = timeout_ms
        self.version = version
        self.raw = raw
        self.future = future
        self.timer = timer


class _ClientProtocol(asyncio.BufferedProtocol):
    def __init__(self, owner: "ClientConnection", max_response_bytes: int) -> None:
        self._owner = owner
        self._reader = FrameReader(max_response_bytes)
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._can_write: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports don't subclass asyncio.Transport; they implement it.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.lost.done():
            self.lost.set_result(None)
        self._wake_writers()
        self._owner._on_lost(exc)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        reader = self._reader
        reader.buffer_updated(nbytes)
        while self.transport is not None:
            try:
                frame = reader.next_frame()
            except FrameError as e:
                self._owner._fail(ProtocolViolationError(f"bad response frame: {e}"))
                return
            if frame is None:
                return
            self._owner._on_frame(frame)

    def pause_writing(self) -> None:
        if self._can_write is None:
            self._can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake_writers()

    def _wake_writers(self) -> None:
        fut = self._can_write
        self._can_write = None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def drain(self) -> None:
        fut = self._can_write
        if fut is not None:
            await fut


class ClientConnection:
    """One connection to a Kafka broker (ours or anyone's)."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str | None,
        *,
        registry: Registry = REGISTRY,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        authenticate: Authenticator | None = None,
        stats: NetworkStats | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.registry = registry
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._max_response_bytes = max_response_bytes
        self._ssl_context = ssl_context
        self._authenticate = authenticate
        self.stats = stats if stats is not None else NetworkStats()
        self._protocol: _ClientProtocol | None = None
        self._pending: dict[int, _Pending] = {}
        self._next_corr = 0
        self._closed_error: NetworkError | None = None
        self._connected = False
        # api key -> (min, max) the server supports; filled by the ApiVersions exchange.
        self.server_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version = -1  # the ApiVersions version the server accepted

    def __repr__(self) -> str:
        return f"ClientConnection({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._connected and self._closed_error is None

    async def connect(self, negotiate: bool = True) -> None:
        """Open the connection (TLS when an ``ssl_context`` was given), then unless ``negotiate``
        is False learn the server's versions and run the ``authenticate`` step (SASL)."""
        if self._protocol is not None:
            raise RuntimeError("connect() called twice")
        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if self._ssl_context is not None:
            tls = {"ssl": self._ssl_context, "server_hostname": self.host}
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _ClientProtocol(self, self._max_response_bytes),
                    self.host,
                    self.port,
                    **tls,
                ),
                self.connect_timeout_ms / 1000,
            )
        except OSError as e:  # TimeoutError and TLS failures (ssl.SSLError) included
            self._closed_error = ConnectError(f"cannot connect to {self.host}:{self.port}: {e!r}")
            raise self._closed_error from e
        self._protocol = proto
        self._connected = True
        self.stats.connections_created += 1
        if negotiate:
            try:
                await self.negotiate_versions()
            except ProtocolError as e:
                self.close()
                raise ConnectError(f"{self.host}:{self.port}: bad ApiVersions response: {e}") from e
            except NetworkError as e:
                self.close()
                raise ConnectError(f"{self.host}:{self.port}: version negotiation: {e}") from e
            if self._authenticate is not None:
                try:
                    await self._authenticate(self)
                except Exception as e:
                    self.stats.auth_failures += 1
                    self.close()
                    raise ConnectError(f"{self.host}:{self.port}: authentication: {e}") from e
                self.stats.auth_successes += 1

    async def negotiate_versions(self) -> None:
        """ApiVersions v3 first; on UNSUPPORTED_VERSION (answered in v0 format, as Kafka does),
        retry once with the highest version the server listed for ApiVersions.

        Part of setting the connection up, so bounded like it (librdkafka's
        socket.connection.setup.timeout.ms covers it too): by the connect timeout, at least
        ``MIN_SETUP_MS``. A peer whose kernel accepted the connection but that does not answer
        (a frozen process, a link cut right after the handshake) is given up on and tried again
        at the connect cadence, not after the request timeout."""
        version = FIRST_API_VERSIONS_VERSION
        setup_ms = min(self.request_timeout_ms, max(self.connect_timeout_ms, MIN_SETUP_MS))
        for _ in range(2):
            raw = await self.send_raw(
                API_VERSIONS,
                version,
                body_bytes(self._api_versions_request(version)),
                timeout_ms=setup_ms,
            )
            spec = self.registry.spec(API_VERSIONS)
            (error,) = _INT16.unpack_from(raw, 0) if len(raw) >= 2 else (-1,)
            if error == UNSUPPORTED_VERSION:
                try:
                    response = decode_body(spec.response_type(0), raw, 0)
                except ProtocolError:
                    # librdkafka's mock cluster writes this error in the flexible format, not
                    # v0: fall back to v0, which every server speaks.
                    version = 0
                    continue
                listed = [k for k in response.api_keys if int(k.api_key) == API_VERSIONS]
                retry = min(int(listed[0].max_version), spec.max_version) if listed else 0
                if retry >= version:  # the server contradicts itself: don't loop
                    retry = 0
                version = retry
                continue
            response = decode_body(spec.response_type(version), raw, 0)
            code = int(getattr(response.error_code, "value", response.error_code))
            if code != 0:
                raise ConnectError(f"ApiVersions v{version} failed with error code {code}")
            self.server_versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
            }
            self.api_versions_version = version
            return
        raise ConnectError("ApiVersions: the server rejected every version tried")

    def _api_versions_request(self, version: int) -> Any:
        request_type = self.registry.spec(API_VERSIONS).request_type(version)
        names = {f.name for f in dataclasses.fields(request_type)}
        kwargs: dict[str, str] = {}
        if "client_software_name" in names:
            kwargs["client_software_name"] = SOFTWARE_NAME
            kwargs["client_software_version"] = _software_version()
        return request_type(**kwargs)

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both this codec and the server support."""
        try:
            ours = self.registry.spec(api_key)
        except KeyError:
            raise UnsupportedVersionError(
                f"api key {api_key} is unknown to this client", api_key
            ) from None
        theirs = self.server_versions.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"{ours.name} (api key {api_key}) is not supported by {self.host}:{self.port}",
                api_key,
            )
        lo = max(ours.min_version, theirs[0])
        for v in range(min(ours.max_version, theirs[1]), lo - 1, -1):
            if ours.supports(v):
                return v
        raise UnsupportedVersionError(
            f"{ours.name} (api key {api_key}): this client supports versions "
            f"{ours.min_version}-{ours.max_version}, {self.host}:{self.port} supports "
            f"{theirs[0]}-{theirs[1]}",
            api_key,
        )

    def request_type(self, api_key: int) -> type:
        """The request body class to build for ``api_key`` at the negotiated version."""
        return self.registry.spec(api_key).request_type(self.version_for(api_key))

    # -- requests

    async def send(
        self, body: Any, version: int | None = None, *, timeout_ms: int | None = None
    ) -> Any:
        """Send a kio-style request body and return the decoded response body.

        The version defaults to the body type's own (kio types are per version).
        ``timeout_ms`` replaces ``request_timeout_ms`` for this request (see ``send_raw``).
        """
        api_key = int(type(body).__api_key__)
        if version is None:
            version = int(type(body).__version__)
        self._check_version(api_key, version)
        return await self._request(api_key, version, [body_bytes(body)], False, timeout_ms)

    async def send_raw(
        self,
        api_key: int,
        version: int,
        body: bytes | bytearray | memoryview,
        *,
        timeout_ms: int | None = None,
    ) -> memoryview:
        """Send an encoded request body; return the response body (header stripped), undecoded.
        ``timeout_ms`` replaces ``request_timeout_ms`` for this request: a long poll (Fetch)
        gives up after a bound derived from its own wait (``fetch_timeout_ms``). As any timeout,
        it closes the connection, so the next request reconnects rather than queue behind an
        answer stuck in a connection that has not noticed a cut."""
        result: memoryview = await self._request(api_key, version, [body], True, timeout_ms)
        return result

    async def send_no_response(self, body: Any, version: int | None = None) -> None:
        """Send a request the server will not answer (Produce with acks=0)."""
        api_key = int(type(body).__api_key__)
        if version is None:
            version = int(type(body).__version__)
        self._check_version(api_key, version)
        proto = self._live_protocol()
        self._write(proto, api_key, version, self._take_corr(), [body_bytes(body)])
        await proto.drain()

    def _check_version(self, api_key: int, version: int) -> None:
        theirs = self.server_versions.get(api_key)
        if self.server_versions and (theirs is None or not theirs[0] <= version <= theirs[1]):
            raise UnsupportedVersionError(
                f"api key {api_key} v{version} is not supported by {self.host}:{self.port} "
                f"(supported: {theirs})",
                api_key,
            )

    def _take_corr(self) -> int:
        corr = self._next_corr
        self._next_corr = (corr + 1) & 0x7FFFFFFF
        return corr

    def _live_protocol(self) -> _ClientProtocol:
        if self._closed_error is not None:
            raise ConnectionClosedError(str(self._closed_error))
        proto = self._protocol
        if proto is None or proto.transport is None:
            raise ConnectionClosedError(f"not connected to {self.host}:{self.port}")
        return proto

    def _write(
        self,
        proto: _ClientProtocol,
        api_key: int,
        version: int,
        corr: int,
        body: list[bytes | bytearray | memoryview],
    ) -> None:
        header = encode_request_header(
            api_key,
            version,
            corr,
            self.client_id,
            self.registry.request_header_version(api_key, version),
        )
        size = len(header) + sum(len(b) for b in body)
        transport = proto.transport
        assert transport is not None
        transport.writelines([_SIZE.pack(size), header, *body])
        stats = self.stats
        stats.requests_sent += 1
        stats.bytes_sent += size + 4
        if size + 4 > stats.request_size_max:
            stats.request_size_max = size + 4

    async def _request(
        self,
        api_key: int,
        version: int,
        body: list[bytes | bytearray | memoryview],
        raw: bool,
        timeout_ms: int | None = None,
    ) -> Any:
        proto = self._live_protocol()
        loop = asyncio.get_running_loop()
        corr = self._take_corr()
        future: asyncio.Future[Any] = loop.create_future()
        wait_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        timer = loop.call_later(wait_ms / 1000, self._on_timeout, corr)
        self._pending[corr] = _Pending(api_key, version, raw, future, timer, wait_ms)
        self._write(proto, api_key, version, corr, body)
        await proto.drain()
        try:
            return await future
        except asyncio.CancelledError:
            # The response will still arrive; forget it (its slot is gone from _pending).
            pending = self._pending.pop(corr, None)
            if pending is not None:
                pending.timer.cancel()
            raise

    def _on_frame(self, frame: memoryview) -> None:
        self.stats.responses_received += 1
        self.stats.bytes_received += len(frame) + 4
        if len(frame) < 4:
            self._fail(ProtocolViolationError(f"response of {len(frame)} bytes has no header"))
            return
        (corr,) = _SIZE.unpack_from(frame, 0)
        pending = self._pending.pop(corr, None)
        if pending is None:
            if corr < self._next_corr:
                return  # the answer to a request whose caller gave up (cancelled)
            self._fail(ProtocolViolationError(f"response with unknown correlation id {corr}"))
            return
        pending.timer.cancel()
        if pending.future.done():
            return
        try:
            spec = self.registry.spec(pending.api_key)
            if pending.raw:
                _, pos = parse_response_header(frame, spec.response_header_version(pending.version))
                result: Any = frame[pos:]
            else:
                _, result = self.registry.decode_response(pending.api_key, pending.version, frame)
        except (ProtocolError, KeyError) as e:
            # The frame boundary is intact, so the connection is still usable.
            pending.future.set_exception(
                ProtocolViolationError(
                    f"cannot decode response to api key {pending.api_key} v{pending.version}: {e}"
                )
            )
            return
        pending.future.set_result(result)

    def _on_timeout(self, corr: int) -> None:
        pending = self._pending.pop(corr, None)
        if pending is None:
            return
        if not pending.future.done():
            pending.future.set_exception(
                RequestTimeoutError(
                    f"no response from {self.host}:{self.port} to api key {pending.api_key} "
                    f"v{pending.version} within {pending.timeout_ms} ms"
                )
            )
        self._fail(
            ConnectionClosedError(f"connection to {self.host}:{self.port} closed after a timeout")
        )

    def _on_lost(self, exc: Exception | None) -> None:
        detail = f": {exc!r}" if exc is not None else ""
        self._fail(ConnectionClosedError(f"connection to {self.host}:{self.port} lost{detail}"))

    def _fail(self, error: NetworkError) -> None:
        if self._closed_error is None:
            self._closed_error = error
            if self._connected:
                self.stats.connections_closed += 1
        pending = list(self._pending.values())
        self._pending.clear()
        for p in pending:
            p.timer.cancel()
            if not p.future.done():
                p.future.set_exception(error)
        proto = self._protocol
        if proto is not None and proto.transport is not None:
            proto.transport.abort()

    def close(self) -> None:
        """Close now; requests still waiting fail with `ConnectionClosedError`."""
        self._fail(ConnectionClosedError(f"connection to {self.host}:{self.port} closed"))

    async def wait_closed(self) -> None:
        proto = self._protocol
        if proto is not None:
            await proto.lost


def backoff_ms(failures: int, base_ms: int, max_ms: int, rng: random.Random) -> float:
    """Kafka's reconnect backoff: base * 2^failures, capped at max, with +/-20% jitter."""
    exp = base_ms * (2 ** min(failures, 30))
    return min(float(max_ms), float(exp)) * rng.uniform(0.8, 1.2)


class ReconnectingClient:
    """A `ClientConnection` that is re-opened (and versions re-negotiated) when it drops.

    Like Kafka's NetworkClient, it does not retry requests: a call fails when the connection is
    down, and the next call reconnects, waiting out the reconnect backoff (``reconnect.backoff.ms``
    doubling up to ``reconnect.backoff.max.ms``, jittered) since the previous attempt.
    """

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str | None,
        *,
        registry: Registry = REGISTRY,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        rng: random.Random | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        ssl_context: ssl.SSLContext | None = None,
        authenticate: Authenticator | None = None,
        stats: NetworkStats | None = None,
        on_connect: ConnectObserver | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.registry = registry
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._on_connect = on_connect
        self.stats = stats if stats is not None else NetworkStats()  # of all its connections
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._max_response_bytes = max_response_bytes
        self._rng = rng if rng is not None else random.Random()
        self._monotonic = monotonic
        self._ssl_context = ssl_context
        self._authenticate = authenticate
        self._conn: ClientConnection | None = None
        self._lock = asyncio.Lock()
        self._failures = 0
        self._last_attempt: float | None = None
        self._closed = False
        self.connects = 0  # successful connections, for metrics and tests

    async def connection(self) -> ClientConnection:
        """The live connection, (re)connecting if needed; raises `ConnectError` if that fails."""
        conn = self._conn
        if conn is not None and conn.connected:
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.connected:
                return conn
            if self._closed:
                raise ConnectionClosedError(f"client for {self.host}:{self.port} is closed")
            await self._wait_backoff()
            self._last_attempt = self._monotonic()
            conn = ClientConnection(
                self.host,
                self.port,
                self.client_id,
                registry=self.registry,
                request_timeout_ms=self.request_timeout_ms,
                connect_timeout_ms=self.connect_timeout_ms,
                max_response_bytes=self._max_response_bytes,
                ssl_context=self._ssl_context,
                authenticate=self._authenticate,
                stats=self.stats,
            )
            try:
                await conn.connect()
            except NetworkError as e:
                self._failures += 1
                if self._on_connect is not None:
                    self._on_connect(e)
                raise
            if self._failures and self._on_connect is not None:
                self._on_connect(None)
            self._failures = 0
            self._conn = conn
            self.connects += 1
            return conn

    async def _wait_backoff(self) -> None:
        if self._last_attempt is None:
            return
        delay = backoff_ms(
            self._failures, self.reconnect_backoff_ms, self.reconnect_backoff_max_ms, self._rng
        ) / 1000 - (self._monotonic() - self._last_attempt)
        if delay > 0:
            await asyncio.sleep(delay)

    async def version_for(self, api_key: int) -> int:
        return (await self.connection()).version_for(api_key)

    async def send(
        self, body: Any, version: int | None = None, *, timeout_ms: int | None = None
    ) -> Any:
        return await (await self.connection()).send(body, version, timeout_ms=timeout_ms)

    async def send_raw(
        self,
        api_key: int,
        version: int,
        body: bytes | bytearray | memoryview,
        *,
        timeout_ms: int | None = None,
    ) -> memoryview:
        conn = await self.connection()
        return await conn.send_raw(api_key, version, body, timeout_ms=timeout_ms)

    async def send_no_response(self, body: Any, version: int | None = None) -> None:
        await (await self.connection()).send_no_response(body, version)

    def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()

    async def wait_closed(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
