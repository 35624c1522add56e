"""The log cleaner survives kill -9 at any point: a real node cleans a large compacted
partition (many 1 MiB segments of small records over many keys) and is killed at a random
moment of the clean, ``ROUNDS`` times; after every restart a stock confluent-kafka consumer
reads the partition from offset 0 and the log is checked against a model of what was
produced:

* every record read is one that was produced, at the offset it was acknowledged at;
* for every key the latest acknowledged value is there, at its offset (nothing lost);
* offsets only increase (within the read, and from one round to the next);
* start-up left no ``.cleaned``/``.swap`` file behind.

Records produced while the kill lands and never acknowledged may or may not be in the log;
when read, they join the model. Seeded: the seed is printed (``-s``), and
``KMIRROR_CLEANER_CRASH_SEED`` replays one. ``KMIRROR_CLEANER_CRASH_ROUNDS`` sets the number
of rounds (CI runs fewer, to stay well under a minute on two busy cores).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .clients import create_topic, wait_for
from .node import Node

pytestmark = pytest.mark.serial  # a time budget: bin/test.sh runs it alone

CI_ROUNDS = 6
ROUNDS = int(os.environ.get("KMIRROR_CLEANER_CRASH_ROUNDS", CI_ROUNDS))
SEED = int(os.environ.get("KMIRROR_CLEANER_CRASH_SEED", random.randrange(1 << 32)))
TOPIC = "crashy"
KEYS = 40_000
ROUND_RECORDS = 60_000  # ~4 MiB of small records: ~4 closed segments of dirt per round
TOMBSTONE_EVERY = 23  # one update in 23 deletes its key (kept: delete.retention.ms is a day)
TIME_BUDGET_S = 45 + 6 * ROUNDS


@dataclass
class Model:
    """What was produced: offset -> (key, value), and the records sent but not acknowledged."""

    at: dict[int, tuple[bytes, bytes | None]] = field(default_factory=dict)
    unacked: dict[bytes, bytes] = field(default_factory=dict)  # value -> key (values unique)
    high: int = -1  # the highest offset known to be in the log

    def ack(self, offset: int, key: bytes, value: bytes | None) -> None:
        self.at[offset] = (key, value)
        self.high = max(self.high, offset)
        if value is not None:
            self.unacked.pop(value, None)

    def latest(self) -> dict[bytes, tuple[int, bytes | None]]:
        return {k: (o, v) for o, (k, v) in sorted(self.at.items())}


@dataclass
class Seq:
    n: int = 0

    def value(self, key: bytes) -> bytes:
        self.n += 1
        return b"%s=%d;" % (key, self.n) + b"." * 16


@pytest.fixture
def crash_node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "node1", log__cleaner__backoff__ms="50")
    n.start()
    yield n
    n.kill()


def partition_dir(node: Node) -> Path:
    return node.log_dir / f"{TOPIC}-0"


def staged_files(node: Node) -> list[Path]:
    try:
        return [p for p in partition_dir(node).iterdir() if p.name.endswith((".cleaned", ".swap"))]
    except FileNotFoundError:
        return []


def _delivery(model: Model, errors: list[str]) -> Any:
    def cb(err: Any, msg: Any) -> None:
        if err is None:
            model.ack(msg.offset(), msg.key(), msg.value())
        else:
            errors.append(str(err))

    return cb


def produce_round(node: Node, model: Model, seq: Seq, rng: random.Random) -> int:
    """ROUND_RECORDS updates of random keys, all acknowledged; returns the first offset."""
    p = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    errors: list[str] = []
    cb = _delivery(model, errors)
    before = model.high
    first = [-1]

    def on_delivery(err: Any, msg: Any) -> None:
        cb(err, msg)
        if err is None and first[0] < 0:
            first[0] = msg.offset()

    for i in range(ROUND_RECORDS):
        key = b"key-%06d" % rng.randrange(KEYS)
        value = None if i % TOMBSTONE_EVERY == 0 else seq.value(key)
        while True:
            try:
                p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors[:5]
    assert first[0] > before, "offsets went back"
    return first[0]


def child_pids(node: Node) -> list[int]:
    assert node.proc is not None
    out: list[int] = []
    for task in Path(f"/proc/{node.proc.pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out.extend(int(p) for p in (task / "children").read_text().split())
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def clean_in_progress(node: Node) -> bool:
    return any(p.name.endswith(".log.cleaned") for p in staged_files(node))


def read_checkpoint(node: Node) -> str:
    try:
        return (node.log_dir / "cleaner-offset-checkpoint").read_text()
    except FileNotFoundError:
        return ""


def calibrate(node: Node) -> float:
    """Seconds one clean of a round's dirt takes (the window the kills aim at)."""
    wait_for(lambda: clean_in_progress(node), 15, "the cleaner to start")
    start, checkpoint = time.monotonic(), read_checkpoint(node)
    wait_for(lambda: read_checkpoint(node) != checkpoint, 60, "the clean to finish", step=0.01)
    return time.monotonic() - start


def kill_while_cleaning(
    node: Node, model: Model, seq: Seq, rng: random.Random, window: float
) -> str:
    """Keep producing a trickle while waiting for a clean, kill -9 at a random moment of it;
    returns what the directory held right after the kill."""
    p = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 5000,
        }
    )
    errors: list[str] = []
    cb = _delivery(model, errors)
    kill_at: float | None = None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        now = time.monotonic()
        if kill_at is None and clean_in_progress(node):
            kill_at = now + rng.uniform(0, window)
        if kill_at is not None and now >= kill_at:
            break
        key = b"key-%06d" % rng.randrange(KEYS)
        value = seq.value(key)
        model.unacked[value] = key
        with contextlib.suppress(BufferError):
            p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=cb)
        p.poll(0.002)
    workers = child_pids(node)
    node.kill()
    # The cleaner's worker processes die with the node (a survivor would go on writing
    # .cleaned files next to the restarted node's own).
    wait_for(lambda: not any(alive(pid) for pid in workers), 5, "the workers to die")
    stage = (
        "missed"
        if kill_at is None
        else "+".join(
            sorted(
                {p.suffix for p in partition_dir(node).iterdir()}
                & {".cleaned", ".swap", ".deleted"}
            )
        )
        or "between"
    )
    p.purge()
    p.poll(0)  # acknowledgements that arrived before the kill still count
    p.flush(0)
    return stage


def check_log(node: Node, model: Model, started_ns: int) -> int:
    """Read the whole partition with confluent-kafka and compare it with the model; returns
    the number of records read."""
    leftovers = [p.name for p in staged_files(node) if p.stat().st_ctime_ns < started_ns]
    assert not leftovers, f"start-up left {leftovers}"
    c = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": "checker",
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 << 20,
        }
    )
    tp = TopicPartition(TOPIC, 0)
    try:
        _, hw = c.get_watermark_offsets(tp, timeout=15)
        assert hw > model.high, f"acknowledged offset {model.high} lost: high watermark {hw}"
        c.assign([TopicPartition(TOPIC, 0, 0)])
        seen: dict[int, tuple[bytes, bytes | None]] = {}
        last = -1
        deadline = time.monotonic() + 30
        while last < hw - 1 and time.monotonic() < deadline:
            for m in c.consume(num_messages=5000, timeout=0.2):
                assert m.error() is None, m.error()
                offset, key, value = m.offset(), m.key(), m.value()
                assert offset is not None and key is not None
                assert offset > last, f"offset {offset} after {last}"
                last = offset
                seen[offset] = (key, value)
        assert last == hw - 1, f"read up to {last}, high watermark {hw}"
    finally:
        c.close()
    for offset, (key, value) in seen.items():
        if offset in model.at:
            assert model.at[offset] == (key, value), f"offset {offset} changed"
        else:  # sent while the node died, never acknowledged: it made it to the log
            assert value is not None and model.unacked.get(value) == key, f"stranger at {offset}"
            model.ack(offset, key, value)
    for key, (offset, value) in model.latest().items():
        assert seen.get(offset) == (key, value), f"latest value of {key!r} at {offset} lost"
    # What the cleaner removed is gone for good: keep the model to what is still there.
    model.at = {o: kv for o, kv in model.at.items() if o in seen}
    model.unacked.clear()
    return len(seen)


def test_kill_9_while_cleaning_loses_nothing(crash_node: Node) -> None:
    node = crash_node
    print(f"cleaner crash test: seed {SEED}, {ROUNDS} rounds")
    rng = random.Random(SEED)
    started = time.monotonic()
    create_topic(
        node.bootstrap,
        TOPIC,
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "1048576",  # the smallest a topic accepts: many segments
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    model, seq = Model(), Seq()
    produce_round(node, model, seq, rng)
    window = calibrate(node)
    stages: dict[str, int] = {}
    for n in range(ROUNDS):
        produce_round(node, model, seq, rng)
        stage = kill_while_cleaning(node, model, seq, rng, window)
        stages[stage] = stages.get(stage, 0) + 1
        started_ns = time.time_ns()
        node.start()
        read = check_log(node, model, started_ns)
        print(f"round {n}: killed at {stage}, {read} records read, high offset {model.high}")
    elapsed = time.monotonic() - started
    print(f"clean window {window:.2f}s, kills by stage {stages}, {elapsed:.1f}s")
    # The kills did land inside cleans (else the test proved nothing).
    assert stages.get("missed", 0) < ROUNDS and any(".cleaned" in s for s in stages)
    assert elapsed < TIME_BUDGET_S
