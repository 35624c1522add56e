"""The server's parts on their own, with what they are given instead of a server: the request
memory (a fake clock, a callback), the admission (a place released once), the open-connections
table (connections that report to it)."""

import socket
from dataclasses import dataclass

from broker.network.admission import Admission
from broker.network.connection_quotas import ConnectionLimits, ConnectionQuotas
from broker.network.open_connections import OpenConnections
from broker.network.request_memory import RequestMemory
from broker.network.stats import ServerCounters


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_request_memory_fills_frees_and_counts_the_time_at_its_bound() -> None:
    clock, freed = Clock(), []
    memory = RequestMemory(1000, clock, lambda: freed.append(clock.now))
    memory.reserve(600)
    assert not memory.full
    memory.reserve(400)  # at the bound
    assert memory.full and memory.queued_bytes == 1000
    clock.now += 2.5
    assert memory.depleted_seconds == 2.5  # counting while full
    memory.unreserve(100)
    assert not memory.full and freed == [102.5]
    clock.now += 10
    memory.reserve(100)
    clock.now += 1
    memory.unreserve(1000)
    assert memory.queued_bytes == 0 and freed == [102.5, 113.5]
    assert memory.depleted_seconds == 3.5


def test_unbounded_request_memory_never_fills() -> None:
    memory = RequestMemory(-1, Clock(), lambda: None)
    memory.reserve(1 << 40)
    assert not memory.full and memory.depleted_seconds == 0.0


@dataclass
class Place:
    listener_name: str
    ip: str
    counted: bool = True


def test_admission_gives_a_place_back_once() -> None:
    listeners = frozenset({"CLIENT"})
    quotas = ConnectionQuotas(
        ConnectionLimits(max_connections_per_ip=1, listeners=listeners), now=0.0
    )
    admission = Admission(quotas, listeners, Clock())
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    try:
        assert admission.admit("CLIENT", a, "10.0.0.1")
        assert not admission.admit("CLIENT", c, "10.0.0.1")  # over its per-IP limit: closed
        assert c.fileno() == -1
        assert admission.rejected == {"max.connections.per.ip": 1}
        place = Place("CLIENT", "10.0.0.1")
        admission.release(place)
        admission.release(place)  # once only
        assert not place.counted and admission.listener_stats["CLIENT"].closed == 1
        assert quotas.total == 0
    finally:
        for s in (a, b, d):
            s.close()


class FakeConnection:
    def __init__(self) -> None:
        self.closing = False
        self.resumed = 0
        self.aborted: bool | None = None

    def shutdown(self, abort: bool) -> None:
        self.closing = True
        self.aborted = abort

    def resume_after_memory(self) -> None:
        self.resumed += 1


def test_open_connections_count_and_drop_what_opens_once_closing() -> None:
    counters, gone = ServerCounters(), []
    table = OpenConnections(counters, gone.append)
    first, second, late = FakeConnection(), FakeConnection(), FakeConnection()
    table.opened(first)  # type: ignore[arg-type]
    table.opened(second)  # type: ignore[arg-type]
    assert [table.next_index(), table.next_index()] == [0, 1]
    assert (counters.connections_open, counters.connections_total, len(table)) == (2, 2, 2)
    second.closing = True
    table.resume_reading()
    assert (first.resumed, second.resumed) == (1, 0)  # a closing one is left alone
    table.closed(second)  # type: ignore[arg-type]
    assert gone == [second] and counters.connections_open == 1
    table.stop_taking()
    table.opened(late)  # type: ignore[arg-type]
    assert late.aborted is True and len(table) == 1 and counters.connections_total == 2
