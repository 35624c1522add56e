"""Connection limits of a node, as Kafka's broker applies them; sans-IO (the caller passes the
time and does the waiting).

- ``max.connections`` (the node) and ``listener.name.X.max.connections`` (one listener): at the
  limit a listener stops accepting until a connection closes. The inter-broker listener, when
  it is not the only one, is only held by its own limit: past the node's limit it still
  accepts, and the least recently active connection of another listener is closed.
- ``max.connections.per.ip`` (``max.connections.per.ip.overrides``): a new connection over its
  address's limit is closed at once.
- ``max.connection.creation.rate`` (the node) and ``listener.name.X.max.connection.creation.rate``
  (KIP-612): new connections per second, a token bucket holding one second's worth; the
  listener waits before accepting past it. The inter-broker listener (not the only one) is only
  held by its own.

Exempt listeners (the controller's) are under none of these limits and are not counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

UNLIMITED: Final = 2**31 - 1  # Kafka's Int.MaxValue default for the connection limits


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_creation_rate: int = UNLIMITED  # connections per second
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    listener_creation_rate: Mapping[str, int] = field(default_factory=dict)
    inter_broker_listener: str | None = None
    exempt_listeners: frozenset[str] = frozenset()
    listeners: frozenset[str] = frozenset()  # every listener of the node, exempt ones included


class TokenBucket:
    """``rate`` tokens a second, holding at most one second's worth (full at the start)."""

    __slots__ = ("_at", "rate", "tokens")

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self._at = now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self.tokens = min(self.rate, self.tokens + (now - self._at) * self.rate)
        self._at = now

    def wait(self, now: float) -> float:
        """Seconds until a token is there (0: now; inf: a rate of 0 never gives one)."""
        self._refill(now)
        if self.tokens >= 1:
            return 0.0
        if self.rate <= 0:
            return math.inf
        return (1 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1


class ConnectionQuotas:
    """Counts of open connections (per listener, per address, in all) against the limits."""

    def __init__(self, limits: ConnectionLimits, now: float) -> None:
        self.limits = limits
        # As Kafka: the inter-broker listener is protected only when there are other listeners
        # to take the node's limits (a lone listener is the clients' too).
        counted = limits.listeners - limits.exempt_listeners
        self._protected = (
            limits.inter_broker_listener
            if limits.inter_broker_listener in counted and len(counted) > 1
            else None
        )
        self.total = 0  # counted connections (exempt listeners left out)
        self.per_listener: dict[str, int] = {}
        self.per_ip: dict[str, int] = {}
        self._node_rate = (
            TokenBucket(limits.max_creation_rate, now)
            if limits.max_creation_rate < UNLIMITED
            else None
        )
        self._listener_rates = {
            name: TokenBucket(rate, now)
            for name, rate in limits.listener_creation_rate.items()
            if rate < UNLIMITED
        }

    def exempt(self, listener: str) -> bool:
        return listener in self.limits.exempt_listeners

    def _inter_broker(self, listener: str) -> bool:
        return listener == self._protected

    # -- max.connections

    def blocked(self, listener: str) -> str | None:
        """The config key that keeps ``listener`` from taking one more connection now, or None."""
        if self.exempt(listener):
            return None
        lim = self.limits
        if self.per_listener.get(listener, 0) >= lim.listener_max_connections.get(
            listener, UNLIMITED
        ):
            return f"listener.name.{listener.lower()}.max.connections"
        if self.total >= lim.max_connections and not self._inter_broker(listener):
            return "max.connections"
        return None

    def over_node_limit(self) -> bool:
        """Past ``max.connections`` (only the inter-broker listener gets there): one connection of
        another listener is to be closed."""
        return self.total > self.limits.max_connections

    # -- max.connections.per.ip

    def ip_limit(self, ip: str) -> int:
        return self.limits.per_ip_overrides.get(ip, self.limits.max_connections_per_ip)

    def ip_refused(self, listener: str, ip: str) -> bool:
        """Is a new connection from ``ip`` one too many (to be closed at once)?"""
        return not self.exempt(listener) and self.per_ip.get(ip, 0) >= self.ip_limit(ip)

    # -- max.connection.creation.rate

    def creation_wait(self, listener: str, now: float) -> float:
        """Seconds ``listener`` waits before its next connection (0: none)."""
        if self.exempt(listener):
            return 0.0
        wait = 0.0
        bucket = self._listener_rates.get(listener)
        if bucket is not None:
            wait = bucket.wait(now)
        if self._node_rate is not None and not self._inter_broker(listener):
            wait = max(wait, self._node_rate.wait(now))
        return wait

    def created(self, listener: str, now: float) -> None:
        """A connection was accepted on ``listener``: it takes its tokens."""
        if self.exempt(listener):
            return
        bucket = self._listener_rates.get(listener)
        if bucket is not None:
            bucket.take(now)
        if self._node_rate is not None and not self._inter_broker(listener):
            self._node_rate.take(now)

    # -- counts

    def opened(self, listener: str, ip: str) -> None:
        if self.exempt(listener):
            return
        self.total += 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1

    def closed(self, listener: str, ip: str) -> None:
        if self.exempt(listener):
            return
        self.total -= 1
        _decrement(self.per_listener, listener)
        _decrement(self.per_ip, ip)


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 1) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


@dataclass(slots=True)
class ListenerStats:
    """What a listener's acceptor did, in all (read by the metrics layer)."""

    created: int = 0  # connections accepted and served
    closed: int = 0  # of those, closed since
    throttled: int = 0  # waits for a creation rate
    throttle_seconds: float = 0.0
    blocked_times: int = 0  # stops at max.connections (node or listener)
    blocked_seconds: float = 0.0  # ended stops, in all
    blocked_since: float | None = None  # the stop going on, if any (monotonic time)
