"""A transactional producer under faults, and what a read_committed reader must then see.

`TxnProducerLoad` (a thread) runs transactions of ``records`` records spread over the topic's
partitions, committing or aborting each by a seeded choice, with confluent-kafka as any user
would: a failed step drops the producer and a new one with the same transactional id fences
it (init_transactions aborts what it left open). Each transaction ends in one of three sets:

- ``committed``: commit_transaction returned: every record must be visible to read_committed;
- ``aborted``: commit was never asked for: no record may be visible;
- ``unknown``: commit was asked for and failed: all of its records visible, or none.

`check_transactions` reads everything back (read_committed and read_uncommitted) and checks
those three promises; `stable_lag` compares each partition's last stable offset with its high
watermark; `prepared_transactions` lists transactions the coordinator holds in Prepare*.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import (
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from broker.coordinator.runtime import partition_for
from tests.integration.test_transactions import read_values

TXN_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions as shipped


@dataclass
class TxnOutcomes:
    committed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    unknown: set[int] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)


class TxnProducerLoad(threading.Thread):
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rng: random.Random,
        records: int = 20,
        abort_ratio: float = 0.3,
        timeout_ms: int = 10_000,
        max_txns: int = 100_000,
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.rng, self.records, self.abort_ratio = rng, records, abort_ratio
        self.timeout_ms, self.max_txns = timeout_ms, max_txns
        self.transactional_id = f"txn-load-{uuid.uuid4().hex[:8]}"
        self.out = TxnOutcomes()
        self.stop_event = threading.Event()
        self._producer: Producer | None = None

    def stop(self, timeout: float = 60.0) -> None:
        self.stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), "the transactional producer did not stop"

    def _new_producer(self) -> Producer | None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": self.timeout_ms,
                "linger.ms": 5,
                "socket.timeout.ms": 5_000,
                "reconnect.backoff.max.ms": 500,
            }
        )
        try:
            p.init_transactions(10)
            return p
        except KafkaException as e:
            self._error("init", e)
            return None

    def _error(self, step: str, e: KafkaException) -> None:
        err = e.args[0]
        name = err.name() if isinstance(err, KafkaError) else str(err)
        self.out.errors[f"{step}:{name}"] += 1

    def run(self) -> None:
        txn = 0
        while not self.stop_event.is_set() and txn < self.max_txns:
            if self._producer is None:
                self._producer = self._new_producer()
                if self._producer is None:
                    time.sleep(0.2)
                    continue
            txn += 1
            if not self._one(self._producer, txn):
                self._producer = None  # dropped: the next init_transactions fences it
                time.sleep(0.1)

    def _one(self, p: Producer, txn: int) -> bool:
        """One transaction; False when the producer must be replaced."""
        commit = self.rng.random() >= self.abort_ratio
        try:
            p.begin_transaction()
            for i in range(self.records):
                value = b"%d:%d" % (txn, i)
                p.produce(self.topic, value=value, partition=i % self.partitions)
            if p.flush(10) != 0:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush"))
        except KafkaException as e:
            self._error("produce", e)
            self.out.aborted.add(txn)
            return False
        if not commit:
            self.out.aborted.add(txn)
            try:
                p.abort_transaction(10)
                return True
            except KafkaException as e:
                self._error("abort", e)
                return False
        for _ in range(3):
            try:
                p.commit_transaction(10)
                self.out.committed.add(txn)
                return True
            except KafkaException as e:
                self._error("commit", e)
                if not e.args[0].retriable():
                    break
        self.out.unknown.add(txn)
        return False


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 30.0
) -> list[bytes]:
    """Every value from the start of each partition to its end (the LSO for read_committed)."""
    return read_values(bootstrap, topic, partitions, isolation, timeout)


def check_transactions(
    bootstrap: str, topic: str, partitions: int, out: TxnOutcomes, records: int
) -> list[str]:
    """What read_committed shows against what the producer was told; the problems found."""
    problems: list[str] = []
    seen: Counter[int] = Counter()
    for v in read_all(bootstrap, topic, partitions, "read_committed"):
        seen[int(v.split(b":")[0])] += 1
    written: Counter[int] = Counter()
    for v in read_all(bootstrap, topic, partitions, "read_uncommitted"):
        written[int(v.split(b":")[0])] += 1
    missing = sorted(t for t in out.committed if seen[t] < records)
    if missing:
        problems.append(
            f"committed transactions not (fully) visible to read_committed: {missing[:20]} "
            f"(visible/in log: {[(seen[t], written[t]) for t in missing[:20]]})"
        )
    leaked = sorted(t for t in out.aborted if seen[t])
    if leaked:
        problems.append(f"aborted transactions visible to read_committed: {leaked[:20]}")
    torn = sorted(t for t in out.unknown if seen[t] not in (0, records))
    if torn:
        problems.append(f"transactions visible in part: {[(t, seen[t]) for t in torn]}")
    duplicated = sorted(t for t, n in seen.items() if n > records)
    if duplicated:
        problems.append(f"transactions visible more than once: {duplicated[:20]}")
    return problems


def stable_lag(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """partition -> (last stable offset, high watermark)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions)]

    def ends(level: IsolationLevel) -> dict[int, int]:
        fs = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in tps}, isolation_level=level, request_timeout=10
        )
        return {tp.partition: f.result().offset for tp, f in fs.items()}

    lso, hw = ends(IsolationLevel.READ_COMMITTED), ends(IsolationLevel.READ_UNCOMMITTED)
    return {p: (lso[p], hw[p]) for p in range(partitions)}


def prepared_transactions(bootstrap: str) -> list[tuple[str, str]]:
    """(transactional id, state) of every transaction in PrepareCommit/PrepareAbort."""
    from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

    a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        found = a.list_transactions(state_filters=["PrepareCommit", "PrepareAbort"])
        return [(t.transactional_id, str(t.state)) for ts in found.values() for t in ts]
    finally:
        a.close()


def wait_until(cond: Callable[[], bool], timeout: float, step: float = 0.5) -> bool:
    """Poll ``cond`` (exceptions count as False) until true or ``timeout``; the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return True
        except Exception:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


def grow_transaction_shard(bootstrap: str, transactional_id: str, records: int) -> int:
    """Write ``records`` records to the ``__transaction_state`` partition of ``transactional_id``
    (InitProducerId of another id that hashes to that partition, over kafka-python's protocol
    client): a shard that long yields to the event loop while it loads, which is when a leader
    change can race the load. The records written."""
    from kafka.net.compat import KafkaNetClient  # type: ignore[import-untyped]
    from kafka.protocol.producer.transaction import (  # type: ignore[import-untyped]
        InitProducerIdRequest,
    )

    target = partition_for(transactional_id, TXN_STATE_PARTITIONS)
    filler = next(
        f"{transactional_id}-filler-{i}"
        for i in range(10_000)
        if partition_for(f"{transactional_id}-filler-{i}", TXN_STATE_PARTITIONS) == target
    )
    client = KafkaNetClient(bootstrap_servers=bootstrap)
    written, attempts = 0, 0
    deadline = time.monotonic() + 60
    try:
        client.check_version()
        while written < records and attempts < 3 * records and time.monotonic() < deadline:
            attempts += 1
            request = InitProducerIdRequest(
                transactional_id=filler,
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
                max_version=4,
            )
            response = client.send_and_receive(1, request, timeout_ms=10_000)
            if response.error_code == 0:
                written += 1
            else:
                time.sleep(0.1)  # the shard loading, say: the caller started it
    finally:
        client.close()
    return written
