"""Helpers for the replication core's unit tests: a log whose writes are visible, a broker view."""

from collections.abc import Iterable

from broker.replication.partition_state import ReplicationConfig
from tests.broker.replication_sim import MemLog, Registration


class UnitLog(MemLog):
    """``MemLog`` whose high watermark takes what the core writes, unclamped, so a test sees
    a core that would put it past the log end (the broker's log clamps, hiding the bug)."""

    __slots__ = ("hw_writes",)

    def __init__(self) -> None:
        super().__init__()
        self.hw_writes: list[int] = []

    @property
    def high_watermark(self) -> int:
        return self.hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.hw_writes.append(offset)
        self.hw = offset


def log_with(epochs: Iterable[int], *, hw: int = 0) -> UnitLog:
    """A log holding one record per entry of ``epochs`` (its leader epoch), ids from 1000."""
    log = UnitLog()
    for i, epoch in enumerate(epochs):
        if log.cache.latest_epoch != epoch:
            log.cache.assign(epoch, i)
        log.recs.append((epoch, 1000 + i))
    log.hw = hw
    return log


class Brokers:
    """A ``BrokerView``: registered epochs; fenced and shutting-down sets."""

    def __init__(self, epochs: dict[int, int] | None = None) -> None:
        self.epochs = dict(epochs or {1: 101, 2: 102, 3: 103})
        self.fenced: set[int] = set()
        self.shutting_down: set[int] = set()

    def broker_epoch(self, broker_id: int) -> int | None:
        if broker_id in self.fenced:
            return None
        return self.epochs.get(broker_id)

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        return broker_id in self.shutting_down


def reg(
    isr: Iterable[int] = (1, 2, 3),
    *,
    leader: int = 1,
    leader_epoch: int = 5,
    partition_epoch: int = 10,
    replicas: tuple[int, ...] = (1, 2, 3),
) -> Registration:
    return Registration(replicas, tuple(isr), leader, leader_epoch, partition_epoch)


def config(lag_ms: int = 1000, min_isr: int = 2) -> ReplicationConfig:
    return ReplicationConfig(replica_lag_time_max_ms=lag_ms, min_insync_replicas=min_isr)
