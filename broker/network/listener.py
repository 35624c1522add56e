"""A listener's definition (`Listener`) and its listening sockets: one per address its host
resolves to, as asyncio's create_server binds them.
"""

import asyncio
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Final

ACCEPT_BACKLOG: Final = 128


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # e.g. "PLAINTEXT", "INTERNAL"
    host: str
    port: int  # 0 = ephemeral; see KafkaServer.bound_ports
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    # Largest frame before the connection authenticates (SASL listeners:
    # sasl.server.max.receive.size); None: the server's limit from the start.
    pre_auth_max_bytes: int | None = None


async def _listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host:port``, one per address it resolves to (as asyncio's
    create_server binds them); non-blocking, with SO_REUSEADDR."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    socks: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, type_, proto, _, sockaddr in infos:
            if (family, sockaddr) in seen:
                continue
            seen.add((family, sockaddr))
            sock = socket.socket(family, type_, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(sockaddr)
            sock.listen(ACCEPT_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    if not socks:
        raise OSError(f"no address to listen on for {host}:{port}")
    return socks
