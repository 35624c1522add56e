"""Running totals of a client's connections, as Kafka's client network metrics count them
(connection-creation-total, incoming-byte-total, request-total, ...).

One `NetworkStats` can be shared by every connection a component opens (a mirror fetcher's
reconnects); the connections only add to it, on the event loop. Rates are left to PromQL.
`ServerCounters` are the listening side's (one per `KafkaServer`, added to by its connections).
"""

from dataclasses import dataclass


@dataclass(slots=True)
class NetworkStats:
    connections_created: int = 0  # connections established (TCP/TLS up)
    connections_closed: int = 0  # of those, closed since (lost, timed out or closed by us)
    bytes_sent: int = 0  # request frames, size prefixes included
    bytes_received: int = 0  # response frames, size prefixes included
    requests_sent: int = 0
    responses_received: int = 0
    request_size_max: int = 0  # the largest request frame
    auth_successes: int = 0  # SASL exchanges that succeeded
    auth_failures: int = 0  # SASL exchanges that failed

    @property
    def connection_count(self) -> int:
        return self.connections_created - self.connections_closed

    def copy(self) -> "NetworkStats":
        return NetworkStats(
            self.connections_created,
            self.connections_closed,
            self.bytes_sent,
            self.bytes_received,
            self.requests_sent,
            self.responses_received,
            self.request_size_max,
            self.auth_successes,
            self.auth_failures,
        )


@dataclass(slots=True)
class ServerCounters:
    """A server's running totals, read by the metrics layer."""

    connections_open: int = 0
    connections_total: int = 0
    requests: int = 0
    bytes_in: int = 0  # request bytes read, size prefixes included
    bytes_out: int = 0  # response bytes written, size prefixes included
    idle_closed: int = 0  # connections closed by connections.max.idle.ms
