"""Client quota series, named after Kafka's per-client quota metrics (KIP-13/124).

Kafka's ``kafka.server:type={Produce,Fetch,Request},user=U,client-id=C`` MBeans become:

- ``kafka_server_produce_byte_rate`` / ``kafka_server_fetch_byte_rate`` (bytes/s) and
  ``kafka_server_request_request_time`` (percent of one thread), the rate the quota is checked
  against, labelled ``user`` and ``client_id`` as Kafka's sensor tags are (the matching quota
  entity's parts; "" for a part it does not have);
- ``kafka_server_{produce,fetch,request}_throttle_time``: the mean throttle time given to that
  client, in ms (Kafka's throttle-time is a windowed average).

Only clients under a quota have series (as Kafka creates sensors only then), and at most
``MAX_CLIENT_SERIES`` per quota type, so label cardinality stays bounded; idle clients drop out
after an hour. Without labels, ``kafka_server_quota_throttled_requests`` and
``kafka_server_quota_throttle_seconds`` count every throttled response per quota type.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

MAX_CLIENT_SERIES: Final = 1000
QUOTA_TYPES: Final = ("Produce", "Fetch", "Request")
_RATE_NAME: Final = {"Produce": "byte_rate", "Fetch": "byte_rate", "Request": "request_time"}


@dataclass(frozen=True, slots=True)
class QuotaRow:
    quota_type: str  # Produce / Fetch / Request
    user: str
    client_id: str
    rate: float
    throttle_time_ms: float


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    rows: tuple[QuotaRow, ...] = ()
    # quota type -> (throttled responses, seconds of throttle given)
    totals: dict[str, tuple[int, float]] = field(default_factory=dict)


class QuotaCollector(Collector):
    def __init__(self, read: Callable[[], QuotaSnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []
        out: list[Any] = []
        labels = ["user", "client_id"]
        for kind in QUOTA_TYPES:
            base = f"kafka_server_{kind.lower()}"
            unit = "percent of a thread" if kind == "Request" else "bytes/s"
            rate = GaugeMetricFamily(
                f"{base}_{_RATE_NAME[kind]}",
                f"{kind} quota: the client's rate ({unit}) its quota is checked against",
                labels=labels,
            )
            throttle = GaugeMetricFamily(
                f"{base}_throttle_time",
                f"{kind} quota: mean throttle time given to the client, ms",
                labels=labels,
            )
            n = 0
            for r in snap.rows:
                if r.quota_type != kind:
                    continue
                n += 1
                if n > MAX_CLIENT_SERIES:
                    break
                rate.add_metric([r.user, r.client_id], r.rate)
                throttle.add_metric([r.user, r.client_id], r.throttle_time_ms)
            out += [rate, throttle]
        requests = CounterMetricFamily(
            "kafka_server_quota_throttled_requests",
            "Responses throttled by a client quota, per quota type",
            labels=["quota_type"],
        )
        seconds = CounterMetricFamily(
            "kafka_server_quota_throttle_seconds",
            "Throttle time given by client quotas, per quota type",
            labels=["quota_type"],
        )
        for kind in QUOTA_TYPES:
            count, secs = snap.totals.get(kind, (0, 0.0))
            requests.add_metric([kind], count)
            seconds.add_metric([kind], secs)
        return [*out, requests, seconds]
