"""What a stock producer sees when it writes to a mirror topic (READ_ONLY_TOPIC, 134, which the
clients predate), as docs/mirroring.md tells it, and how an operator tells a mirror topic apart:
`kafka-mirrors.sh --describe` lists it, `kafka-configs.sh --topic --describe` does not show
the internal mirror.name."""

import asyncio
import subprocess
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer  # type: ignore[import-untyped]

from .clients import ck_produce, create_topic, make_records, wait_for
from .mirror_helpers import create_mirror, describe_rows, running, write_mirror_config
from .node import ROOT, Node

MESSAGE = "Topic orders is a mirror topic and read-only"


def _confluent(bootstrap: str) -> tuple[KafkaError | None, float]:
    """Default retries: an error that came back before the delivery timeout was not retried."""
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000})
    start = time.monotonic()
    p.produce("orders", b"x", on_delivery=lambda e, _m: errors.append(e))
    assert p.flush(30) == 0
    return errors[0], time.monotonic() - start


def _kafka_python(bootstrap: str) -> BaseException:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        p.send("orders", b"x").get(timeout=20)
    except Exception as e:  # the documented type is checked by the caller
        return e
    finally:
        p.close()
    raise AssertionError("kafka-python's send succeeded on a mirror topic")


async def _aiokafka(bootstrap: str) -> BaseException:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    await p.start()
    try:
        await asyncio.wait_for(p.send_and_wait("orders", b"x"), 30)
    except Exception as e:
        return e
    finally:
        await p.stop()
    raise AssertionError("aiokafka's send succeeded on a mirror topic")


def test_producers_to_a_mirror_topic_and_how_to_spot_one(tmp_path: Path) -> None:
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst", node_id=4)
    with running(src, dst):
        create_topic(src.bootstrap, "orders", 1)
        ck_produce(src.bootstrap, "orders", make_records("orders", 3, 1))
        props = write_mirror_config(tmp_path / "m.properties", src.bootstrap)
        create_mirror(dst, "dr", props, "orders")
        wait_for(
            lambda: [r[6] for r in describe_rows(dst, "dr", "orders")] == ["MIRRORING"],
            30,
            "the topic to be mirrored",
        )

        err, took = _confluent(dst.bootstrap)
        assert err is not None and err.code() == 134 and err.str() == "Err-134?", err
        assert took < 15, f"librdkafka retried READ_ONLY_TOPIC for {took:.1f}s"

        e = _kafka_python(dst.bootstrap)
        assert type(e).__name__ == "UnrecognizedBrokerError", repr(e)
        assert str(e) == f"[Error 134] UnrecognizedBrokerError: {MESSAGE}", str(e)

        e = asyncio.run(_aiokafka(dst.bootstrap))
        assert type(e).__name__ == "UnknownError" and str(e) == "[Error -1] UnknownError", repr(e)

        listed = subprocess.run(
            [str(ROOT / "bin" / "kafka-mirrors.sh"), "--bootstrap-server", dst.bootstrap, "--describe"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip
        rows = [line.split() for line in listed.splitlines()[1:]]
        assert [(r[0], r[1], r[6]) for r in rows] == [("dr", "orders", "MIRRORING")], listed

        configs = subprocess.run(
            [str(ROOT / "bin" / "kafka-configs.sh"), "--bootstrap-server", dst.bootstrap,
             "--topic", "orders", "--describe", "--all"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip
        assert "mirror.name" not in configs, configs
