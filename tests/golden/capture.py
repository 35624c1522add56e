"""Capture golden request frames from stock Kafka clients.

Run from the repository root: ``python -m tests.golden.capture``. Each scenario gets a
fresh fake broker on an ephemeral loopback port; every request frame it receives is
written to ``tests/golden/<client>/<seq>_<api>_v<version>.bin`` and described in
``tests/golden/index.json`` (``frames``), next to what each produce scenario was asked
to send (``scenarios``). Not part of CI: the captured files are committed.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kio.schema.index import api_key_map

from .fake_broker import CapturedFrame, FakeBroker
from .scenarios import ExpectedRecord, Scenario, all_scenarios

GOLDEN_DIR = Path(__file__).resolve().parent
SCENARIO_TIMEOUT_S = 30.0


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def _record_json(r: ExpectedRecord) -> dict[str, Any]:
    return {
        "partition": r.partition,
        "key": _hex(r.key),
        "value": _hex(r.value),
        "headers": [[k, _hex(v)] for k, v in r.headers],
    }


def _client_versions() -> dict[str, str]:
    import aiokafka
    import confluent_kafka
    import kafka

    return {
        "confluent_kafka": (
            f"confluent-kafka {confluent_kafka.version()[0]}"
            f" (librdkafka {confluent_kafka.libversion()[0]})"
        ),
        "kafka_python": f"kafka-python {kafka.__version__}",
        "aiokafka": f"aiokafka {aiokafka.__version__}",
    }


def run_scenario(sc: Scenario) -> list[CapturedFrame]:
    broker = FakeBroker(partitions={sc.topic: sc.partitions} if sc.topic else None)
    failure: list[BaseException] = []

    def target() -> None:
        try:
            sc.run(broker, sc)
        except BaseException as exc:  # reported by the caller
            failure.append(exc)

    with broker:
        worker = threading.Thread(target=target, daemon=True)
        worker.start()
        worker.join(SCENARIO_TIMEOUT_S)
        if worker.is_alive():
            raise TimeoutError(f"{sc.client}/{sc.name} did not finish")
        if failure:
            raise RuntimeError(f"{sc.client}/{sc.name} failed") from failure[0]
    if broker.unhandled:
        raise RuntimeError(f"{sc.client}/{sc.name}: unanswered requests {broker.unhandled}")
    return list(broker.frames)


def main() -> int:
    started = time.monotonic()
    frames_index: dict[str, dict[str, Any]] = {}
    scenarios_index: dict[str, dict[str, Any]] = {}
    seq: dict[str, int] = {}
    for client_dir in {sc.client for sc in all_scenarios()}:
        out = GOLDEN_DIR / client_dir
        out.mkdir(exist_ok=True)
        for old in out.glob("*.bin"):
            old.unlink()

    for sc in all_scenarios():
        t0 = time.monotonic()
        frames = run_scenario(sc)
        for captured in frames:
            h = captured.header
            n = seq.get(sc.client, 0)
            seq[sc.client] = n + 1
            rel = (
                f"{sc.client}/{n:03d}_{api_key_map.get(h.api_key, h.api_key)}_v{h.api_version}.bin"
            )
            (GOLDEN_DIR / rel).write_bytes(captured.frame)
            frames_index[rel] = {
                "client": sc.client,
                "scenario": sc.name,
                "api_key": h.api_key,
                "api_version": h.api_version,
                "correlation_id": h.correlation_id,
                "client_id": h.client_id,
                "connection": captured.connection,
            }
        entry: dict[str, Any] = {"client": sc.client, "scenario": sc.name, "topic": sc.topic}
        if sc.records:
            entry.update(
                compression=sc.compression or "none",
                idempotent=sc.idempotent,
                records=[_record_json(r) for r in sc.records],
            )
        scenarios_index[f"{sc.client}/{sc.name}"] = entry
        print(f"{sc.client}/{sc.name}: {len(frames)} frames in {time.monotonic() - t0:.1f}s")

    index = {
        "clients": _client_versions(),
        "frames": frames_index,
        "scenarios": scenarios_index,
    }
    (GOLDEN_DIR / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    print(f"{len(frames_index)} frames captured in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
