"""What a handler gets besides the request body."""

from dataclasses import dataclass, field
from typing import Any

from protocol.headers import RequestHeader


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    connection_id: str
    listener: str
    peer_host: str
    principal: str = "User:ANONYMOUS"
    now_ms: int = 0
    # per-connection state shared by the handlers of one connection (e.g. SASL)
    session: dict[str, Any] = field(default_factory=dict)
    # the client's connection (network.server.ConnectionContext: ``mute`` for quota
    # throttling); None for a request that came in an Envelope
    connection: Any = None

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""
