"""Client load for the replication fault tests, with confluent-kafka (stock clients only).

Every stock client runs in a child process (``python -m tests.faults.workload <role>``) and
reports through a file the test reads: librdkafka has aborted (an internal assertion) and
segfaulted whole processes during failovers, which must not take the test down with it. A
child that dies is started again (`Child`: bounded restarts, every crash counted and named);
a client crash is no broker failure, but the test prints it. The test process itself only
drives faults and checks results.

Roles (each one client handle, reused for the child's whole life):

- ``producer`` (`SeqProducerProcess`): an idempotent acks=all producer writing numbered records
  (value = the number) round-robin over the partitions; reports each acknowledged number with
  its partition, offset and time (for the failover time). Incarnation ``n`` numbers from
  ``n * SEQ_SPAN``, so a restarted producer never reuses a number.
- ``eos-app`` (`EosAppProcess`): a transactional consume-transform-produce app: reads the
  numbered topic with read_committed, writes ``"<in partition>:<in offset>:<number>"`` to the
  output topic and the consumed offsets in the same transaction; about one transaction in five
  is aborted on purpose with an ``ABORTED:`` poison record in it, then re-read from the
  committed offsets.
- ``offsets`` (`OffsetWatch`): the app's committed group offsets once a second; any going
  backwards is a regression.
- ``metadata`` (`MetadataWatch`): every partition's leader, replicas and ISR (and the live
  brokers) twice a second; the test reads the latest snapshot.
- ``create-topics`` and ``read`` run once (`create_topics`, `read_partitions`).

Every loop is bounded by a stop signal and a count; every client call has a timeout. Times are
``time.monotonic()``, one clock for every process of the machine (Linux CLOCK_MONOTONIC).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ABORTED = b"ABORTED:"
MAX_STEPS = 1_000_000
MAX_RESTARTS = 20
SEQ_SPAN = 10_000_000  # numbers per producer incarnation
ROOT = Path(__file__).resolve().parents[2]


# -- the test's side: supervised children ----------------------------------------------------


class Child(threading.Thread):
    """Runs ``python -m tests.faults.workload <role> ...`` and starts it again when it dies
    (at most MAX_RESTARTS times). Incarnation ``n`` reports to ``<workdir>/<name>-<n>.out``."""

    def __init__(
        self, name: str, role: str, args: list[str], workdir: Path, stop_timeout: float = 30.0
    ) -> None:
        super().__init__(daemon=True, name=f"{name}-supervisor")
        self.child_name, self.role, self.args = name, role, args
        self.workdir, self.stop_timeout = workdir, stop_timeout
        self.stop_event = threading.Event()
        self.crashes: list[str] = []
        self.outputs: list[Path] = []
        self._proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    def run(self) -> None:
        for n in range(MAX_RESTARTS):
            out = self.workdir / f"{self.child_name}-{n}.out"
            log = self.workdir / f"{self.child_name}-{n}.log"
            self.outputs.append(out)
            with log.open("wb") as log_file:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.faults.workload", self.role, *self.args,
                     "--out", str(out), "--incarnation", str(n)],
                    cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                )  # fmt: skip
            while self._proc.poll() is None and not self.stop_event.wait(0.2):
                pass
            if self.stop_event.is_set() and self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                    self.crashes.append(f"{self.child_name} #{n} ignored SIGTERM for "
                                        f"{self.stop_timeout:.0f} s (killed)")  # fmt: skip
                return
            if self._proc.returncode != 0:
                tail = log.read_bytes()[-400:].decode(errors="replace").strip().splitlines()
                self.crashes.append(
                    f"{self.child_name} #{n} exited {self._proc.returncode}: {tail[-1:]}"
                )
            if self.stop_event.is_set() or self.stop_event.wait(1.0):  # no restart storm
                return

    def stop(self) -> None:
        self.stop_event.set()


class _Lines:
    """Reads the JSON lines the incarnations of a child appended, incrementally."""

    def __init__(self, child: Child) -> None:
        self._child = child
        self._pos: dict[Path, int] = {}
        self._lock = threading.Lock()

    def new(self) -> list[Any]:
        got: list[Any] = []
        with self._lock:
            for path in list(self._child.outputs):
                try:
                    with path.open("rb") as f:
                        f.seek(self._pos.get(path, 0))
                        data = f.read()
                except OSError:
                    continue
                whole = data[: data.rfind(b"\n") + 1]  # a torn last line waits for its end
                self._pos[path] = self._pos.get(path, 0) + len(whole)
                got += [json.loads(line) for line in whole.splitlines() if line.strip()]
        return got


class SeqProducerProcess(Child):
    def __init__(self, bootstrap: str, topic: str, partitions: int, workdir: Path,
                 rate: float = 300.0, request_timeout_ms: int = 10_000) -> None:  # fmt: skip
        args = ["--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions),
                "--rate", str(rate), "--request-timeout-ms", str(request_timeout_ms)]  # fmt: skip
        super().__init__("producer", "producer", args, workdir, stop_timeout=150.0)
        self.partitions = partitions
        self.acked: dict[int, tuple[int, int]] = {}  # number -> (partition, offset)
        self.failed: dict[int, str] = {}
        self.fatal: list[str] = []
        self.deliveries: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self._sent: dict[int, int] = {}  # incarnation -> numbers handed to the client
        self._lines = _Lines(self)

    def refresh(self) -> SeqProducerProcess:
        for ev in self._lines.new():
            kind = ev[0]
            if kind == "a":
                _, seq, p, off, t = ev
                self.acked[seq] = (p, off)
                self.deliveries[p].append(t)
            elif kind == "f":
                self.failed[ev[1]] = ev[2]
            elif kind == "F":
                self.fatal.append(ev[1])
            elif kind == "s":
                self._sent[ev[1]] = ev[2]
        return self

    @property
    def sent(self) -> int:
        return sum(self.refresh()._sent.values())

    def first_delivery_after(self, partition: int, t: float) -> float | None:
        later = [d for d in self.refresh().deliveries[partition] if d > t]
        return min(later) if later else None


@dataclass
class AppStats:
    commits: int = 0
    aborts_on_purpose: int = 0
    aborts_on_error: int = 0
    producer_restarts: int = 0
    errors: list[str] = field(default_factory=list)
    died: str = ""


class EosAppProcess(Child):
    """The app; ``stats`` adds up every incarnation's."""

    def __init__(self, bootstrap: str, src: str, dst: str, group: str, seed: int,
                 workdir: Path) -> None:  # fmt: skip
        args = ["--bootstrap", bootstrap, "--src", src, "--dst", dst, "--group", group,
                "--seed", str(seed)]  # fmt: skip
        super().__init__("eos-app", "eos-app", args, workdir, stop_timeout=120.0)

    @property
    def stats(self) -> AppStats:
        total = AppStats()
        for f in list(self.outputs):
            try:
                one = AppStats(**json.loads(f.read_text()))
            except (OSError, ValueError):
                continue
            total.commits += one.commits
            total.aborts_on_purpose += one.aborts_on_purpose
            total.aborts_on_error += one.aborts_on_error
            total.producer_restarts += one.producer_restarts
            total.errors += one.errors
            total.died = total.died or one.died
        return total


class OffsetWatch(Child):
    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int,
                 workdir: Path) -> None:  # fmt: skip
        args = ["--bootstrap", bootstrap, "--group", group, "--topic", topic,
                "--partitions", str(partitions)]  # fmt: skip
        super().__init__("offsets", "offsets", args, workdir)
        self.highest: dict[int, int] = {}
        self.regressions: list[str] = []
        self.reads = 0
        self.last: tuple[float, dict[int, int]] | None = None
        self._lines = _Lines(self)

    def refresh(self) -> OffsetWatch:
        for t, offsets in self._lines.new():
            self.last = (t, {int(p): off for p, off in offsets.items()})
            self.check(self.last[1])
        return self

    def check(self, offsets: dict[int, int]) -> None:
        """One more reading: any partition's offset below its highest so far is a regression."""
        self.reads += 1
        for p, off in offsets.items():
            top = self.highest.get(p)
            if top is not None and off < top:
                self.regressions.append(f"partition {p}: committed {off} after {top}")
            if off >= 0 and (top is None or off > top):
                self.highest[p] = off

    def read_once(self) -> dict[int, int]:
        """One reading now, by a fresh client in a child of its own."""
        _, offsets = _once("offsets", [*self.args, "--once"], 180)
        return {int(p): off for p, off in offsets.items()}

    def reading_after(self, t: float) -> dict[int, int] | None:
        """The latest reading, if it was taken after ``t``."""
        last = self.refresh().last
        return last[1] if last is not None and last[0] > t else None


@dataclass
class Snapshot:
    t: float
    brokers: set[int]
    # (topic, partition) -> (leader, replicas, isr)
    parts: dict[tuple[str, int], tuple[int, list[int], list[int]]]


class MetadataWatch(Child):
    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__("metadata", "metadata", ["--bootstrap", bootstrap], workdir)

    def latest(self, after: float = 0.0) -> Snapshot | None:
        """The newest snapshot, if it was taken after ``after`` (monotonic)."""
        if not self.outputs:
            return None
        try:
            raw = json.loads(self.outputs[-1].read_text())
        except (OSError, ValueError):
            return None
        if raw["t"] <= after:
            return None
        parts = {(t, p): (ld, reps, isr) for t, p, ld, reps, isr in raw["parts"]}
        return Snapshot(raw["t"], set(raw["brokers"]), parts)


def _once(role: str, args: list[str], timeout: float) -> Any:
    """Run a one-shot role in a child process and return what it printed (JSON)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.faults.workload", role, *args],
        cwd=ROOT, capture_output=True, timeout=timeout,
    )  # fmt: skip
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"{role} child exited {done.returncode}: {done.stderr.decode(errors='replace')[-800:]}"
        )
    return json.loads(lines[-1])


def create_topics(bootstrap: str, topics: list[str], partitions: int, rf: int,
                  min_isr: int) -> None:  # fmt: skip
    _once("create-topics", ["--bootstrap", bootstrap, "--partitions", str(partitions),
                            "--rf", str(rf), "--min-isr", str(min_isr), *topics], 120)  # fmt: skip


def read_partitions(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 90.0
) -> tuple[dict[int, list[tuple[int, bytes]]], list[str]]:
    """Every record of every partition, (offset, value), from the start to the high watermark
    (read_committed stops at the last stable offset); and the partitions that did not finish."""
    got = _once("read", ["--bootstrap", bootstrap, "--topic", topic, "--partitions",
                         str(partitions), "--isolation", isolation, "--timeout", str(timeout)],
                timeout + 90)  # fmt: skip
    records = {
        int(p): [(off, v.encode("latin-1")) for off, v in recs]
        for p, recs in got["records"].items()
    }
    return records, got["unfinished"]


# -- the children's side ---------------------------------------------------------------------


class _Out:
    """Appends JSON lines to the report file, one write per batch (a crash loses at most the
    batch being written, never part of a line already there)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.pending: list[Any] = []

    def flush(self) -> None:
        if self.pending:
            os.write(self._fd, b"".join(json.dumps(e).encode() + b"\n" for e in self.pending))
            self.pending.clear()


def _die_with_parent() -> None:
    """A child outlives a killed test otherwise (Linux prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)


def _stop_on_sigterm() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def _producer_main(a: argparse.Namespace) -> None:
    from confluent_kafka import KafkaError, Producer

    out, stop = _Out(a.out), _stop_on_sigterm()
    config = {
        "bootstrap.servers": a.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,  # ride out a failover, do not give up on it
        "request.timeout.ms": a.request_timeout_ms,
        "log.connection.close": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        seq = int(msg.value())
        if err is None:
            out.pending.append(["a", seq, msg.partition(), msg.offset(), time.monotonic()])
        else:
            out.pending.append(["f", seq, str(err)])
            if err.fatal():
                out.pending.append(["F", str(err)])

    producer = Producer(config)
    seq, gap = a.incarnation * SEQ_SPAN, 1.0 / a.rate
    next_at, steps = time.monotonic(), 0
    while not stop.is_set() and steps < MAX_STEPS:
        steps += 1
        try:
            producer.produce(a.topic, value=str(seq).encode(), key=f"k{seq}".encode(),
                             partition=seq % a.partitions, on_delivery=on_delivery)  # fmt: skip
            seq += 1
            producer.poll(0)
        except BufferError:
            producer.poll(0.1)
            continue
        except:  # noqa: E722 - cimpl raises KafkaError objects, which are no Exception
            # a fatal idempotence error: note it (the verdict fails on it), start afresh
            out.pending.append(["F", repr(sys.exc_info()[1])])
            producer = Producer(config)
        if steps % 50 == 0:
            out.pending.append(["s", a.incarnation, seq - a.incarnation * SEQ_SPAN])
        out.flush()
        next_at += gap
        pause = next_at - time.monotonic()
        if pause > 0:
            with contextlib.suppress(Exception):
                producer.poll(pause)
    out.pending.append(["s", a.incarnation, seq - a.incarnation * SEQ_SPAN])
    try:
        left = producer.flush(130)
    except:  # noqa: E722 - as above
        out.pending.append(["F", f"final flush: {sys.exc_info()[1]!r}"])
        left = 0
    if left:
        out.pending.append(["F", f"{left} records still unacknowledged after the final flush"])
    out.flush()


class EosApp:
    """Consume ``src``, transform, produce to ``dst``, offsets in the same transaction."""

    def __init__(self, a: argparse.Namespace, stop: threading.Event) -> None:
        self.bootstrap, self.src, self.dst, self.group = a.bootstrap, a.src, a.dst, a.group
        self.rng = random.Random(a.seed + a.incarnation)
        self.stats_file, self.stop_event = Path(a.out), stop
        self.stats = AppStats()
        self.txn_id = f"{a.group}-txn"

    def _producer(self) -> Any:
        from confluent_kafka import KafkaException, Producer

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.txn_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "transaction.timeout.ms": 30_000,
                "message.timeout.ms": 30_000,
                "request.timeout.ms": 10_000,
            }
        )
        deadline = time.monotonic() + 120
        while True:  # the coordinator may be moving: retry until it answers (bounded)
            try:
                p.init_transactions(20)
                return p
            except KafkaException as e:
                if time.monotonic() > deadline or self.stop_event.is_set():
                    raise KafkaException(
                        f"init_transactions kept failing for 120 s or until stopped: {e}"
                    ) from e
                self.stats.errors.append(f"init_transactions: {e}")
                time.sleep(0.5)

    def _rewind(self, consumer: Any) -> None:
        """Back to the committed offsets: what an aborted transaction read is read again.

        Retried while the group coordinator moves (NOT_COORDINATOR during a failover): going on
        from the consumer's position instead would skip the aborted transaction's input."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        assignment = consumer.assignment()
        if not assignment:
            return
        deadline = time.monotonic() + 120
        while True:
            try:
                committed = consumer.committed(assignment, timeout=30)
                break
            except KafkaException as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"committed offsets unreadable for 120 s: {e}") from e
                self.stats.errors.append(f"rewind: {e}")
                time.sleep(0.5)
        for tp in committed:
            consumer.seek(
                TopicPartition(
                    tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                )
            )

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 15_000,
            }
        )
        consumer.subscribe([self.src])
        try:
            producer = self._producer()
            for _ in range(MAX_STEPS):
                if self.stop_event.is_set():
                    break
                msgs = [m for m in consumer.consume(200, 0.5) if m.error() is None]
                if not msgs:
                    continue
                try:
                    self._transaction(consumer, producer, msgs)
                except KafkaException as e:
                    producer = self._recover(consumer, producer, e)
        except Exception as e:  # the verdict names it; a silent death would not
            self.stats.died = f"{type(e).__name__}: {e}"
        finally:
            self.save_stats()
            with contextlib.suppress(Exception):
                consumer.close()

    def _transaction(self, consumer: Any, producer: Any, msgs: list[Any]) -> None:
        from confluent_kafka import KafkaError, KafkaException

        producer.begin_transaction()
        for m in msgs:
            value = f"{m.partition()}:{m.offset()}:{m.value().decode()}".encode()
            producer.produce(self.dst, value=value, key=m.key(), partition=m.partition())
        if self.rng.random() < 0.2:
            producer.produce(
                self.dst, value=ABORTED + msgs[0].value(), partition=msgs[0].partition()
            )
            producer.abort_transaction(30)
            self.stats.aborts_on_purpose += 1
            self.save_stats()
            self._rewind(consumer)
            return
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        for _ in range(5):
            try:
                producer.commit_transaction(30)
                break
            except KafkaException as e:
                if not e.args[0].retriable():
                    raise
        else:
            raise KafkaException(KafkaError(KafkaError._FATAL, "commit kept failing"))
        self.stats.commits += 1
        self.save_stats()

    def save_stats(self) -> None:
        tmp = self.stats_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.stats)))
        tmp.replace(self.stats_file)

    def _recover(self, consumer: Any, producer: Any, e: Any) -> Any:
        from confluent_kafka import KafkaError, KafkaException

        err = e.args[0]
        self.stats.errors.append(str(err))
        if isinstance(err, KafkaError) and err.txn_requires_abort():
            try:
                producer.abort_transaction(30)
                self.stats.aborts_on_error += 1
                self._rewind(consumer)
                return producer
            except KafkaException as again:
                self.stats.errors.append(f"abort: {again}")
        # fatal, or an outcome we cannot know: a new producer with the same transactional.id
        # fences the old one and settles its transaction; then re-read from what committed
        self.stats.producer_restarts += 1
        with contextlib.suppress(Exception):
            producer.flush(1)
        producer = self._producer()
        self._rewind(consumer)
        return producer


def _app_main(a: argparse.Namespace) -> None:
    app = EosApp(a, _stop_on_sigterm())
    app.save_stats()
    app.run()  # SIGTERM sets the stop event; the app stops between transactions


def _offsets_main(a: argparse.Namespace) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    try:
        from confluent_kafka import ConsumerGroupTopicPartitions
    except ImportError:  # older layouts keep it in the admin module
        from confluent_kafka.admin import ConsumerGroupTopicPartitions  # type: ignore

    stop = _stop_on_sigterm()
    config = {"bootstrap.servers": a.bootstrap, "socket.timeout.ms": 5000}
    request = [
        ConsumerGroupTopicPartitions(
            a.group, [TopicPartition(a.topic, p) for p in range(a.partitions)]
        )
    ]
    admin, misses = AdminClient(config), 0
    out = None if a.once else _Out(a.out)
    for _ in range(MAX_STEPS):
        if not a.once and stop.wait(1.0):
            break
        if misses >= 3:
            # a client that lost the coordinator in a failover has been seen to answer nothing
            # ever again: a new one (rarely: only after three readings in a row failed)
            admin, misses = AdminClient(config), 0
        t = time.monotonic()
        try:
            fut = admin.list_consumer_group_offsets(request, request_timeout=8)
            res = fut[a.group].result(10)
        except Exception:
            misses += 1  # the coordinator moving or down: no reading this time
            if a.once and misses > 12:
                raise
            continue
        misses = 0
        reading = [t, {tp.partition: tp.offset for tp in res.topic_partitions if tp.error is None}]
        if out is None:
            print(json.dumps(reading), flush=True)
            return
        out.pending.append(reading)
        out.flush()


def _metadata_main(a: argparse.Namespace) -> None:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    stop = _stop_on_sigterm()
    admin = AdminClient({"bootstrap.servers": a.bootstrap, "socket.timeout.ms": 5000})
    tmp = Path(a.out + ".tmp")
    for _ in range(MAX_STEPS):
        t = time.monotonic()
        try:
            md = admin.list_topics(timeout=5)
        except Exception:
            md = None
        if md is not None:
            parts = [
                [tm.topic, p.id, p.leader, list(p.replicas), list(p.isrs)]
                for tm in md.topics.values()
                for p in tm.partitions.values()
            ]
            tmp.write_text(json.dumps({"t": t, "brokers": sorted(md.brokers), "parts": parts}))
            tmp.replace(a.out)
        if stop.wait(0.5):
            break


def _create_topics_main(a: argparse.Namespace) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    config = {"min.insync.replicas": str(a.min_isr)}
    fs = admin.create_topics(
        [NewTopic(t, a.partitions, a.rf, config=config) for t in a.topics], operation_timeout=30
    )
    for f in fs.values():
        f.result(60)
    print(json.dumps({"created": a.topics}), flush=True)


def _read_main(a: argparse.Namespace) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": f"verify-{a.topic}-{a.isolation}",
            "isolation.level": a.isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(a.partitions)}
    ends = {p: c.get_watermark_offsets(TopicPartition(a.topic, p), timeout=30)[1] for p in out}
    c.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in out])
    todo = {p for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + a.timeout
    last_progress = time.monotonic()
    while todo and time.monotonic() < deadline and time.monotonic() - last_progress < 15:
        for m in c.consume(1000, 0.5):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    todo.discard(m.partition())  # reached the end (the LSO or the HW)
                continue
            last_progress = time.monotonic()
            out[m.partition()].append((m.offset(), m.value().decode("latin-1")))
    c.close()
    unfinished = [f"{a.topic}-{p}" for p in sorted(todo)]
    print(json.dumps({"records": out, "unfinished": unfinished}), flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.workload")
    roles = parser.add_subparsers(dest="role", required=True)

    def role(name: str, *flags: str) -> argparse.ArgumentParser:
        p = roles.add_parser(name)
        p.add_argument("--bootstrap", required=True)
        for flag in flags:
            p.add_argument(flag, required=True)
        return p

    p = role("producer", "--topic", "--out")
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--rate", type=float, default=300.0)
    p.add_argument("--request-timeout-ms", type=int, default=10_000)
    p = role("eos-app", "--src", "--dst", "--group", "--out")
    p.add_argument("--seed", type=int, required=True)
    p = role("offsets", "--group", "--topic")
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--out", help="keep reading, appending to this file (else: read once, print)")
    p.add_argument("--once", action="store_true")
    role("metadata", "--out")
    for p in roles.choices.values():
        p.add_argument("--incarnation", type=int, default=0)
    p = role("create-topics")
    for flag in ("--partitions", "--rf", "--min-isr"):
        p.add_argument(flag, type=int, required=True)
    p.add_argument("topics", nargs="+")
    p = role("read", "--topic", "--isolation")
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--timeout", type=float, default=90.0)
    a = parser.parse_args(argv)
    _die_with_parent()
    mains = {
        "producer": _producer_main,
        "eos-app": _app_main,
        "offsets": _offsets_main,
        "metadata": _metadata_main,
        "create-topics": _create_topics_main,
        "read": _read_main,
    }
    mains[a.role](a)
    sys.stdout.flush()
    os._exit(0)  # librdkafka handles may still be closing; everything is reported


if __name__ == "__main__":
    main(sys.argv[1:])
