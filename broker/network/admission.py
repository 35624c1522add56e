"""Admitting connections under the node's connection limits, as Kafka's acceptor does: the
counting is `connection_quotas` (sans-IO); this is the waiting, the refusing and the logging.

At ``max.connections`` a listener waits until a connection gives its place back, past the
creation rate it waits before the next accept, and a connection over ``max.connections.per.ip``
is closed at once (as is one over its KIP-612 per-IP creation rate quota, after the quota's
delay). Nothing is checked after a connection is set up, so serving requests costs nothing here.
"""

import asyncio
import contextlib
import copy
import logging
import math
import socket
import struct
from collections.abc import Callable
from typing import Protocol

from .connection_quotas import ConnectionQuotas, ListenerStats

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")


class Place(Protocol):
    """A connection holding its place in the quotas until `Admission.release`."""

    counted: bool  # still holds it: released once only

    @property
    def listener_name(self) -> str: ...
    @property
    def ip(self) -> str: ...


class Admission:
    """Which new connections a node takes, and when; the counts its metrics report."""

    def __init__(
        self,
        quotas: ConnectionQuotas,
        listeners: frozenset[str],
        monotonic: Callable[[], float],
    ) -> None:
        self.quotas = quotas
        self.listener_stats = {name: ListenerStats() for name in listeners}
        self.rejected: dict[str, int] = {}  # limit's config key -> connections closed at accept
        # KIP-612 per-IP connection_creation_rate (a client quota): ip -> seconds the new
        # connection is held before it is closed unserved (0: serve it); None: no such quotas
        self.ip_throttle: Callable[[str], float] | None = None
        self._monotonic = monotonic
        self._slot_waiters: list[asyncio.Future[None]] = []

    def may_accept_now(self, listener: str) -> bool:
        quotas = self.quotas
        return (
            quotas.blocked(listener) is None
            and quotas.creation_wait(listener, self._monotonic()) <= 0
        )

    async def wait_to_accept(self, name: str) -> None:
        """Wait for a place under max.connections and the creation rates."""
        quotas, stats, monotonic = self.quotas, self.listener_stats[name], self._monotonic
        while True:
            blocked = quotas.blocked(name)
            if blocked is not None:
                stats.blocked_since = since = monotonic()
                self._log_blocked(name, blocked)
                try:
                    while quotas.blocked(name) is not None:
                        fut = asyncio.get_running_loop().create_future()
                        self._slot_waiters.append(fut)
                        await fut
                finally:
                    stats.blocked_since = None
                    stats.blocked_seconds += monotonic() - since
            wait = quotas.creation_wait(name, monotonic())
            if wait <= 0:
                return
            if math.isinf(wait):  # a rate of 0: nothing gets in
                wait = 1.0
            stats.throttled += 1
            stats.throttle_seconds += wait
            await asyncio.sleep(wait)

    def admit(self, name: str, sock: socket.socket, ip: str) -> bool:
        """Count ``sock`` (its listener's place is free now) as created and, unless ``ip`` has
        its max.connections.per.ip or its creation rate quota, as open: True, serve it. False:
        it is closed (at once, or after the quota's delay)."""
        quotas = self.quotas
        quotas.created(name, self._monotonic())
        if quotas.ip_refused(name, ip):
            key = "max.connections.per.ip"
            n = self.rejected[key] = self.rejected.get(key, 0) + 1
            if n in (1, 10, 100) or n % 1000 == 0:  # a flood must not flood the log
                log.warning(
                    "closing new connection from %s on %s: %s (%d) reached (%d so far)",
                    ip, name, key, quotas.ip_limit(ip), n,
                )  # fmt: skip
            abort(sock)
            return False
        ip_throttle = self.ip_throttle
        if ip_throttle is not None and not quotas.exempt(name):
            wait = ip_throttle(ip)
            if wait > 0:
                key = "connection_creation_rate"
                n = self.rejected[key] = self.rejected.get(key, 0) + 1
                if n in (1, 10, 100) or n % 1000 == 0:
                    log.warning(
                        "closing new connection from %s on %s in %.3f s: its %s quota reached "
                        "(%d so far)", ip, name, wait, key, n,
                    )  # fmt: skip
                asyncio.get_running_loop().call_later(wait, abort, sock)  # as Kafka: held, closed
                return False
        quotas.opened(name, ip)
        self.listener_stats[name].created += 1
        return True

    def release(self, place: Place) -> None:
        """``place`` gives back its place in the quotas (once); blocked listeners look again."""
        if not place.counted:
            return
        place.counted = False
        self.quotas.closed(place.listener_name, place.ip)
        self.listener_stats[place.listener_name].closed += 1
        waiters, self._slot_waiters = self._slot_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _log_blocked(self, listener: str, key: str) -> None:
        stats = self.listener_stats[listener]
        stats.blocked_times += 1
        n = stats.blocked_times
        if n in (1, 10, 100) or n % 1000 == 0:
            log.warning(
                "listener %s stops accepting until a connection closes: %s reached (%d times)",
                listener, key, n,
            )  # fmt: skip

    def listener_snapshot(self) -> dict[str, ListenerStats]:
        """A copy of each listener's acceptor counts (for a metrics scrape)."""
        out = {name: copy.copy(stats) for name, stats in self.listener_stats.items()}
        now = self._monotonic()
        for stats in out.values():
            if stats.blocked_since is not None:  # a stop going on counts up to now
                stats.blocked_seconds += now - stats.blocked_since
        return out


def abort(sock: socket.socket) -> None:
    """Close with a reset: a refused connection leaves nothing behind (no TIME_WAIT)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
