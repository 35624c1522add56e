"""Client scenarios driven against the fake broker during capture.

Each scenario runs one stock client for a moment with tight timeouts. Produce
scenarios declare the records they send so tests can compare decoded batches.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from .fake_broker import FakeBroker

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class ExpectedRecord:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


@dataclass
class Scenario:
    client: str  # directory name under tests/golden/
    name: str
    run: Callable[[FakeBroker, Scenario], None]
    topic: str = ""
    partitions: int = 1
    compression: str | None = None  # codec name for produce scenarios
    idempotent: bool = False
    records: list[ExpectedRecord] = field(default_factory=list)
    # Consumer scenarios: records already in the log before the client starts.
    seeded_per_partition: int = 0


def sample_records(
    tag: str, partitions: int, *, null_values: bool = True, count: int = 5
) -> list[ExpectedRecord]:
    """Compressible records with keys and headers (and the odd null) for one scenario."""
    out = []
    for i in range(count):
        # Repetitive values so every codec actually shrinks the batch (librdkafka sends
        # a batch uncompressed when compression would not help).
        value = f"{tag} value {i} ".encode() * 12
        key: bytes | None = f"{tag}-key-{i}".encode()
        headers: tuple[Header, ...] = (("trace-id", f"t{i:04d}".encode()), ("source", b"golden"))
        if i == 2:
            key = None
        if i == 3:
            headers = ()
        if null_values and i == 4:
            headers = (("empty", b""), ("nothing", None))
        out.append(ExpectedRecord(i % partitions, key, value, headers))
    return out


def seed_topic(broker: FakeBroker, topic: str, partitions: int, per_partition: int) -> None:
    """Put a small uncompressed batch in every partition so consumers have data to commit."""
    broker.create_topic(topic, partitions)
    now = TZAwareMicros.parse(datetime.datetime.now(datetime.UTC).replace(microsecond=0))
    for p in range(partitions):
        records = tuple(
            Record(
                attributes=i8(0),
                timestamp=now,
                offset=i64(i),
                key=f"seed-{p}-{i}".encode(),
                value=f"seeded value {p}/{i}".encode(),
                headers=(),
            )
            for i in range(per_partition)
        )
        batch = NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            records=records,
            attributes=i16(0),
        )
        buf = io.BytesIO()
        write_new_batch(buf, batch)
        broker.seed(topic, p, buf.getvalue())


# -- confluent-kafka -------------------------------------------------------------


def _confluent_produce(broker: FakeBroker, sc: Scenario) -> None:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap,
        "client.id": f"golden-confluent-{sc.name}",
        "compression.type": sc.compression or "none",
        "linger.ms": 50,
        "enable.idempotence": sc.idempotent,
        "message.timeout.ms": 10000,
    }
    producer = Producer(conf)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for r in sc.records:
        producer.produce(
            sc.topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            headers=list(r.headers),
            on_delivery=on_delivery,
        )
    remaining = producer.flush(15)
    if remaining or errors:
        raise RuntimeError(f"{sc.name}: {remaining} undelivered, errors={errors}")


def _confluent_consume(broker: FakeBroker, sc: Scenario) -> None:
    from confluent_kafka import Consumer

    seed_topic(broker, sc.topic, sc.partitions, sc.seeded_per_partition)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "golden-confluent-consumer",
            "group.id": "golden-confluent-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe([sc.topic])
    wanted = sc.partitions * sc.seeded_per_partition
    got = 0
    deadline = time.monotonic() + 15
    while got < wanted and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
    if got < wanted:
        raise RuntimeError(f"{sc.name}: consumed {got}/{wanted}")
    consumer.commit(asynchronous=False)
    consumer.close()


def _confluent_admin(broker: FakeBroker, sc: Scenario) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._config import ConfigResource
    from confluent_kafka.admin._resource import ResourceType
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "golden-admin"})
    futures = admin.create_topics(
        [
            NewTopic(
                sc.topic,
                num_partitions=sc.partitions,
                replication_factor=1,
                config={"retention.ms": "3600000"},
            )
        ],
        request_timeout=10,
    )
    for f in futures.values():
        f.result(timeout=10)
    resources = [
        ConfigResource(ResourceType.TOPIC, sc.topic),
        ConfigResource(ResourceType.BROKER, "0"),
    ]
    for f in admin.describe_configs(resources, request_timeout=10).values():
        f.result(timeout=10)


# -- kafka-python ----------------------------------------------------------------


def _kafka_python_produce(broker: FakeBroker, sc: Scenario) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        client_id=f"golden-kafka-python-{sc.name}",
        compression_type=sc.compression,
        linger_ms=50,
        request_timeout_ms=10000,
    )
    sc.idempotent = bool(producer.config["enable_idempotence"])
    futures = [
        producer.send(
            sc.topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            headers=list(r.headers),
        )
        for r in sc.records
    ]
    producer.flush(timeout=15)
    for f in futures:
        f.get(timeout=1)
    producer.close(timeout=5)


def _kafka_python_consume(broker: FakeBroker, sc: Scenario) -> None:
    from kafka import KafkaConsumer

    seed_topic(broker, sc.topic, sc.partitions, sc.seeded_per_partition)
    consumer = KafkaConsumer(
        sc.topic,
        bootstrap_servers=broker.bootstrap,
        client_id="golden-kafka-python-consumer",
        group_id="golden-kafka-python-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
        heartbeat_interval_ms=500,
    )
    wanted = sc.partitions * sc.seeded_per_partition
    got = 0
    deadline = time.monotonic() + 15
    while got < wanted and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got += len(batch)
    if got < wanted:
        raise RuntimeError(f"{sc.name}: consumed {got}/{wanted}")
    consumer.commit()
    consumer.close()


def _kafka_python_admin(broker: FakeBroker, sc: Scenario) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        client_id="golden-kafka-python-admin",
        request_timeout_ms=10000,
    )
    admin.create_topics(
        [NewTopic(sc.topic, num_partitions=sc.partitions, replication_factor=1)],
        timeout_ms=10000,
    )
    admin.close()


# -- aiokafka --------------------------------------------------------------------


def _aiokafka_produce(broker: FakeBroker, sc: Scenario) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap,
            client_id=f"golden-aiokafka-{sc.name}",
            compression_type=sc.compression,
            linger_ms=50,
            request_timeout_ms=10000,
            enable_idempotence=sc.idempotent,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    sc.topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    headers=list(r.headers),
                )
                for r in sc.records
            ]
            await asyncio.wait_for(asyncio.gather(*futures), 15)
        finally:
            await producer.stop()

    asyncio.run(main())


def _aiokafka_consume(broker: FakeBroker, sc: Scenario) -> None:
    from aiokafka import AIOKafkaConsumer

    seed_topic(broker, sc.topic, sc.partitions, sc.seeded_per_partition)

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            sc.topic,
            bootstrap_servers=broker.bootstrap,
            client_id="golden-aiokafka-consumer",
            group_id="golden-aiokafka-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=200,
            heartbeat_interval_ms=500,
        )
        await asyncio.wait_for(consumer.start(), 10)
        try:
            wanted = sc.partitions * sc.seeded_per_partition
            got = 0
            deadline = time.monotonic() + 15
            while got < wanted and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                got += sum(len(b) for b in batches.values())
            if got < wanted:
                raise RuntimeError(f"{sc.name}: consumed {got}/{wanted}")
            await asyncio.wait_for(consumer.commit(), 10)
        finally:
            await asyncio.wait_for(consumer.stop(), 10)

    asyncio.run(main())


def _produce(
    client: str,
    name: str,
    run: Callable[[FakeBroker, Scenario], None],
    compression: str | None,
    partitions: int = 1,
    *,
    idempotent: bool = False,
    null_values: bool = True,
) -> Scenario:
    topic = f"golden-{client.replace('_', '-')}-{name}"
    return Scenario(
        client=client,
        name=name,
        run=run,
        topic=topic,
        partitions=partitions,
        compression=compression,
        idempotent=idempotent,
        records=sample_records(f"{client}/{name}", partitions, null_values=null_values),
    )


def all_scenarios() -> list[Scenario]:
    ck = "confluent_kafka"
    kp = "kafka_python"
    ak = "aiokafka"
    scenarios = [
        _produce(ck, "produce_none", _confluent_produce, "none", partitions=2),
        _produce(ck, "produce_gzip", _confluent_produce, "gzip"),
        _produce(ck, "produce_snappy", _confluent_produce, "snappy"),
        _produce(ck, "produce_lz4", _confluent_produce, "lz4"),
        _produce(ck, "produce_zstd", _confluent_produce, "zstd"),
        _produce(ck, "produce_idempotent", _confluent_produce, "none", idempotent=True),
        Scenario(
            ck,
            "consumer_group",
            _confluent_consume,
            topic="golden-consume-ck",
            partitions=3,
            seeded_per_partition=2,
        ),
        Scenario(ck, "admin", _confluent_admin, topic="golden-admin-ck", partitions=2),
        # kafka-python and aiokafka only take bytes header values, so no null ones there.
        _produce(kp, "produce_none", _kafka_python_produce, None, partitions=2, null_values=False),
        _produce(kp, "produce_gzip", _kafka_python_produce, "gzip", null_values=False),
        _produce(kp, "produce_lz4", _kafka_python_produce, "lz4", null_values=False),
        Scenario(
            kp,
            "consumer_group",
            _kafka_python_consume,
            topic="golden-consume-kp",
            partitions=3,
            seeded_per_partition=2,
        ),
        Scenario(kp, "admin", _kafka_python_admin, topic="golden-admin-kp", partitions=2),
        _produce(ak, "produce_none", _aiokafka_produce, None, partitions=2, null_values=False),
        _produce(ak, "produce_gzip", _aiokafka_produce, "gzip", null_values=False),
        Scenario(
            ak,
            "consumer_group",
            _aiokafka_consume,
            topic="golden-consume-ak",
            partitions=3,
            seeded_per_partition=2,
        ),
    ]
    return scenarios
