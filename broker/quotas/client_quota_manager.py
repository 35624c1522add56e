"""Client quota enforcement, sans-IO (no event loop, no sockets): Kafka's ClientQuotaManager.

One `ClientQuotaManager` per quota type (``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``). For a request of (user, client-id) it finds the quota that applies, in
Kafka's order (the first of these entities that has the key set):

    1. user=<user>, client-id=<client-id>       5. user=<default>, client-id=<default>
    2. user=<user>, client-id=<default>         6. user=<default>
    3. user=<user>                              7. client-id=<client-id>
    4. user=<default>, client-id=<client-id>    8. client-id=<default>

and records the value in the rate of that quota's "sensor". Sensors are keyed by Kafka's metric
tags: the user and/or client-id the matching entity names, with the actual user / client-id for
a default part, and "" for a part the entity does not have (so a ``user=<default>`` quota gives
each user a rate of its own, shared by its client ids). No quota: nothing is recorded at all.

The rate is Kafka's ``Rate`` over ``quota.window.num`` samples of ``quota.window.size.seconds``:
a sample starts when a value arrives after the current one has run its window, samples older
than ``num * size`` are dropped, and the rate is the sum of the samples over the time since the
oldest one started (at least ``num - 1`` full windows). When a recorded value takes the rate over
the quota, the throttle time is ``(rate - quota) / quota * window`` (in ms; Kafka's
QuotaUtils.throttleTime), the time until the rate is back at the quota if nothing more comes.

Times are milliseconds from an injected clock (tests use a fake one).
"""

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ..metadata.client_quotas import CLIENT_ID, IP, IP_CONNECTION_RATE, USER, Entity

DEFAULT_SAMPLES: Final = 11  # quota.window.num
DEFAULT_WINDOW_S: Final = 1  # quota.window.size.seconds
INACTIVE_SENSOR_S: Final = 3600  # Kafka expires a client's sensors after an hour unused

Tags = tuple[str, str]  # (user tag, client-id tag)


class Rate:
    """Kafka's ``Rate`` with a ``SampledStat`` of ``samples`` windows of ``window_ms``."""

    __slots__ = ("_current", "_starts", "_values", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(2, samples)
        self.window_ms = window_ms
        self._starts: list[float] = []  # each sample's start (ms)
        self._values: list[float] = []
        self._current = -1

    def record(self, value: float, now_ms: float) -> None:
        if self._current < 0:
            self._starts.append(now_ms)
            self._values.append(0.0)
            self._current = 0
        elif now_ms >= self._starts[self._current] + self.window_ms:
            nxt = (self._current + 1) % self.samples
            if nxt == len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[nxt] = now_ms
                self._values[nxt] = 0.0
            self._current = nxt
        self._values[self._current] += value

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """The time the rate is taken over: since the oldest sample started, and at least
        ``samples - 1`` whole windows."""
        self._purge(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        """Per second."""
        size = self.window_size_ms(now_ms)
        return sum(self._values) / (size / 1000.0) if size > 0 else 0.0


@dataclass(slots=True)
class Sensor:
    rate: Rate
    limit: float
    ids: tuple[str, str]  # a (user, client-id) it was created for, to look its quota up again
    last_ms: float = 0.0
    throttle_ms_total: float = 0.0  # throttle time given out, ms
    throttle_count: int = 0
    recorded: float = 0.0  # total ever recorded (bytes, or percent-seconds)


@dataclass(frozen=True, slots=True)
class Resolved:
    tags: Tags
    limit: float


def _throttle_ms(s: Sensor, now: float) -> int:
    rate = s.rate.measure(now)
    if rate <= s.limit:
        return 0
    return round((rate - s.limit) / s.limit * s.rate.window_size_ms(now))


def _lookup_order(user: str, client: str) -> tuple[tuple[Entity, Tags], ...]:
    """The entities to look for, in Kafka's order, with the sensor tags each gives."""
    return (
        (((CLIENT_ID, client), (USER, user)), (user, client)),
        (((CLIENT_ID, None), (USER, user)), (user, client)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client), (USER, None)), (user, client)),
        (((CLIENT_ID, None), (USER, None)), (user, client)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client),), ("", client)),
        (((CLIENT_ID, None),), ("", client)),
    )


@dataclass(slots=True)
class QuotaStats:
    """Totals for metrics: what was recorded and throttled, across sensors."""

    recorded: float = 0.0
    throttled_requests: int = 0
    throttle_ms_total: float = 0.0
    by_tags: dict[Tags, Sensor] = field(default_factory=dict)


class ClientQuotaManager:
    def __init__(
        self,
        key: str,
        now_ms: Callable[[], float],
        samples: int = DEFAULT_SAMPLES,
        window_s: int = DEFAULT_WINDOW_S,
    ) -> None:
        self.key = key
        self._now_ms = now_ms
        self.samples = samples
        self.window_ms = window_s * 1000
        # entity -> limit, only the entities with this manager's key set
        self._limits: dict[Entity, float] = {}
        self._resolved: dict[tuple[str, str], Resolved | None] = {}
        self._sensors: dict[Tags, Sensor] = {}
        self._source: object = None
        self._last_sweep = 0.0
        self.stats = QuotaStats(by_tags=self._sensors)

    @property
    def enabled(self) -> bool:
        """Some quota of this type is set (otherwise nothing is recorded)."""
        return bool(self._limits)

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        """Take the quotas of the image (entity -> {key: value}); cheap when unchanged."""
        if quotas is self._source:
            return
        self._source = quotas
        self._limits = {e: v[self.key] for e, v in quotas.items() if self.key in v}
        self._resolved.clear()
        for tags, sensor in list(self._sensors.items()):
            r = self._resolve(*sensor.ids)
            if r is None or r.tags != tags:
                del self._sensors[tags]
            else:
                sensor.limit = r.limit

    def resolve(self, user: str, client_id: str) -> Resolved | None:
        """The quota that applies to the client, or None."""
        key = (user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        r = self._resolve(user, client_id)
        if len(self._resolved) > 100_000:
            self._resolved.clear()
        self._resolved[key] = r
        return r

    def _resolve(self, user: str, client_id: str) -> Resolved | None:
        limits = self._limits
        for entity, tags in _lookup_order(user, client_id):
            limit = limits.get(entity)
            if limit is not None:
                return Resolved(tags, limit)
        return None

    def _sensor(self, r: Resolved, ids: tuple[str, str], now: float) -> Sensor:
        s = self._sensors.get(r.tags)
        if s is None:
            self._maybe_sweep(now)
            s = Sensor(Rate(self.samples, self.window_ms), r.limit, ids, last_ms=now)
            self._sensors[r.tags] = s
        return s

    def _maybe_sweep(self, now: float) -> None:
        if now - self._last_sweep < 60_000:
            return
        self._last_sweep = now
        idle = now - INACTIVE_SENSOR_S * 1000
        for tags in [t for t, s in self._sensors.items() if s.last_ms < idle]:
            del self._sensors[tags]

    def record(self, user: str, client_id: str, value: float, now_ms: float | None = None) -> int:
        """Record ``value`` for the client; the throttle time in ms (0: within its quota)."""
        if not self._limits:
            return 0
        r = self.resolve(user, client_id)
        if r is None:
            return 0
        now = self._now_ms() if now_ms is None else now_ms
        s = self._sensor(r, (user, client_id), now)
        s.last_ms = now
        s.rate.record(value, now)
        s.recorded += value
        self.stats.recorded += value
        return _throttle_ms(s, now)

    def over(self, user: str, client_id: str, now_ms: float | None = None) -> bool:
        """The client's rate is above its quota already (a strict quota refuses more)."""
        r = self.resolve(user, client_id) if self._limits else None
        s = None if r is None else self._sensors.get(r.tags)
        if s is None:
            return False
        return s.rate.measure(self._now_ms() if now_ms is None else now_ms) > s.limit

    def throttle_ms(self, user: str, client_id: str, now_ms: float | None = None) -> int:
        """The throttle time the client's rate calls for now (0: within its quota)."""
        r = self.resolve(user, client_id) if self._limits else None
        s = None if r is None else self._sensors.get(r.tags)
        if s is None:
            return 0
        return _throttle_ms(s, self._now_ms() if now_ms is None else now_ms)

    def unrecord(
        self, user: str, client_id: str, value: float, now_ms: float | None = None
    ) -> None:
        """Take back a value recorded for a request that was then answered empty (a
        throttled fetch), as Kafka does."""
        r = self.resolve(user, client_id) if self._limits else None
        if r is None:
            return
        now = self._now_ms() if now_ms is None else now_ms
        s = self._sensor(r, (user, client_id), now)
        s.rate.record(-value, now)
        s.recorded -= value
        self.stats.recorded -= value

    def throttled(self, user: str, client_id: str, throttle_ms: int) -> None:
        """The client was throttled for ``throttle_ms`` (counted for metrics)."""
        r = self.resolve(user, client_id)
        if r is None or throttle_ms <= 0:
            return
        s = self._sensors.get(r.tags)
        if s is not None:
            s.throttle_ms_total += throttle_ms
            s.throttle_count += 1
        self.stats.throttled_requests += 1
        self.stats.throttle_ms_total += throttle_ms

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most one request may record without being throttled for sure (Kafka caps a
        consumer's fetch size with it): ``quota * (samples - 1) * window``; infinite with no
        quota."""
        r = self.resolve(user, client_id) if self._limits else None
        if r is None:
            return float("inf")
        return r.limit * (self.samples - 1) * self.window_ms / 1000.0

    def rate(self, tags: Tags, now_ms: float | None = None) -> float:
        s = self._sensors.get(tags)
        if s is None:
            return 0.0
        return s.rate.measure(self._now_ms() if now_ms is None else now_ms)


def _ip_key(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name  # a host name: matched as written


class IpConnectionQuotaManager:
    """KIP-612's per-IP ``connection_creation_rate``: the quota of ``ip=<address>``, else of
    ``ip=<default>``; new connections counted in a `Rate` per address (the same windows as the
    client quotas). A connection over the rate is throttled for Kafka's throttle time, at most
    one window; Kafka then closes it (after that delay) without serving it."""

    def __init__(
        self,
        now_ms: Callable[[], float],
        samples: int = DEFAULT_SAMPLES,
        window_s: int = DEFAULT_WINDOW_S,
    ) -> None:
        self._now_ms = now_ms
        self.samples = samples
        self.window_ms = window_s * 1000
        self._limits: dict[str | None, float] = {}  # address (None: the default) -> rate
        self._rates: dict[str, Rate] = {}
        self._last: dict[str, float] = {}
        self._source: object = None
        self.throttled = 0  # connections throttled so far

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        if quotas is self._source:
            return
        self._source = quotas
        limits: dict[str | None, float] = {}
        for entity, values in quotas.items():
            if len(entity) == 1 and entity[0][0] == IP and IP_CONNECTION_RATE in values:
                name = entity[0][1]
                limits[None if name is None else _ip_key(name)] = values[IP_CONNECTION_RATE]
        self._limits = limits
        if not limits:
            self._rates.clear()
            self._last.clear()

    def record(self, ip: str, now_ms: float | None = None) -> int:
        """Count a new connection from ``ip``; the throttle time in ms (0: within its rate)."""
        limits = self._limits
        if not limits:
            return 0
        key = _ip_key(ip)
        limit = limits.get(key, limits.get(None))
        if limit is None:
            return 0
        now = self._now_ms() if now_ms is None else now_ms
        rate = self._rates.get(key)
        if rate is None:
            if len(self._rates) > 10_000:
                self._expire(now)
            rate = self._rates[key] = Rate(self.samples, self.window_ms)
        self._last[key] = now
        rate.record(1.0, now)
        observed = rate.measure(now)
        if observed <= limit:
            return 0
        self.throttled += 1
        ms = round((observed - limit) / limit * rate.window_size_ms(now))
        return min(ms, self.window_ms)

    def _expire(self, now: float) -> None:
        idle = now - self.samples * self.window_ms
        for key in [k for k, t in self._last.items() if t < idle]:
            del self._rates[key], self._last[key]


def user_of(principal: str) -> str:
    """The user name a quota is looked up by: the principal's name (``User:alice`` ->
    ``alice``; unauthenticated clients are ``ANONYMOUS``)."""
    kind, sep, name = principal.partition(":")
    return name if sep else kind
