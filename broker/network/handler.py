"""What the server's request handler deals with: the `ConnectionContext` of the connection a
request came on, and the `Response` it returns (buffers, written without being joined).
"""

import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

Buffer: TypeAlias = bytes | bytearray | memoryview
# A response payload without its size prefix (response header included), as a list of buffers
# so large record data is written without being joined.
Response: TypeAlias = list[Buffer]
Handler: TypeAlias = Callable[["ConnectionContext", memoryview], Awaitable[Response | None]]


class ConnectionControl(Protocol):
    """What a `ConnectionContext` asks of its connection (`connection_protocol.Connection`)."""

    @property
    def closing(self) -> bool: ...
    def request_close(self, fatal: bool = False) -> None: ...
    def mute(self, seconds: float) -> None: ...
    def muted_for(self) -> float: ...
    def lift_pre_auth_limit(self) -> None: ...


class ConnectionContext:
    """What a handler knows about the connection a request came on."""

    __slots__ = (
        "_protocol",
        "connection_id",
        "listener",
        "peer",
        "peer_certificate",
        "security_protocol",
        "state",
    )

    def __init__(
        self,
        connection_id: str,
        listener: str,
        peer: tuple[str, int],
        security_protocol: str,
        protocol: ConnectionControl,
    ) -> None:
        self.connection_id = connection_id
        self.listener = listener
        self.peer = peer
        self.security_protocol = security_protocol
        self.state: dict[str, Any] = {}  # per-connection state owned by handlers (e.g. SASL)
        # TLS: the client's verified certificate (``SSLSocket.getpeercert()``), None without one
        self.peer_certificate: dict[str, Any] | None = None
        # Weak: a context kept by a handler must not keep a closed connection's buffers alive.
        self._protocol = weakref.ref(protocol)

    @property
    def peer_host(self) -> str:
        return self.peer[0]

    @property
    def closed(self) -> bool:
        protocol = self._protocol()
        return protocol is None or protocol.closing

    def close(self, *, fatal: bool = False) -> None:
        """Take no more requests; close once the responses of those already taken (the caller's
        own included) are written. For e.g. a failed SASL exchange: answer, then hang up.

        ``fatal``: the calling request itself was unacceptable (unreadable header, a request
        before authentication): requests the client pipelined after it are dropped unanswered,
        as Kafka closes the channel at the bad request."""
        protocol = self._protocol()
        if protocol is not None:
            protocol.request_close(fatal=fatal)

    def mute(self, seconds: float) -> None:
        """Read nothing more from this connection for ``seconds`` (client quota throttling,
        KIP-219: the response goes out now; requests already read are still served)."""
        protocol = self._protocol()
        if protocol is not None:
            protocol.mute(seconds)

    def muted_for(self) -> float:
        """Seconds until a `mute` ends (0: not muted)."""
        protocol = self._protocol()
        return 0.0 if protocol is None else protocol.muted_for()

    def authenticated(self) -> None:
        """The client authenticated: frames up to the server's limit are accepted from now on."""
        protocol = self._protocol()
        if protocol is not None:
            protocol.lift_pre_auth_limit()

    def __repr__(self) -> str:
        return f"ConnectionContext({self.connection_id!r}, listener={self.listener!r})"
