"""Structure-aware protocol fuzzing of a real node (issue 33): every api key and version each
listener advertises gets requests built from its schema with boundary values (see
``protocol_fuzz.py``). Asserted: every request is answered within its bound or its connection
closed, every answer decodes with kio's native reader, nothing reaches the node log as a
traceback or an ERROR, and a stock client's ApiVersions + produce/consume round trip works
after each listener's batch.

The short form runs in the suite (one node, client and controller listeners). The long form
(batches for minutes, RSS flat after warm-up, optionally three nodes) is a command:

    python -m tests.integration.protocol_fuzz --seed N --minutes 10 [--nodes 3]

or this file with ``KMIRROR_FUZZ_MINUTES=10 [KMIRROR_FUZZ_NODES=3]``. ``KMIRROR_FUZZ_SEED``
fixes the seed of either; a failure prints the seed.
"""

import os
import random
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.listener_apis import CONTROLLER_APIS, CONTROLLER_ONLY
from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from .node import Node
from .protocol_fuzz import (
    FUZZ_NODE,
    KNOWN_TOPIC,
    Connection,
    LogWatch,
    RequestGenerator,
    Stats,
    advertised,
    bad_log_lines,
    create_topic,
    decode_answer,
    fuzz_listener,
    health_round_trip,
    known_topic_ids,
    long_run,
    short_plan,
)

SEED = int(os.environ.get("KMIRROR_FUZZ_SEED", random.randrange(1 << 32)))
LONG_MINUTES = float(os.environ.get("KMIRROR_FUZZ_MINUTES", "0"))
LONG_NODES = int(os.environ.get("KMIRROR_FUZZ_NODES", "1"))
HEALTH_TOPIC = f"fuzz-health-{SEED}"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("fuzz") / "n1", **FUZZ_NODE)
    n.start()
    try:
        create_topic(n.bootstrap, HEALTH_TOPIC)
        create_topic(n.bootstrap, KNOWN_TOPIC)
        yield n
    finally:
        n.kill()


def test_each_listener_advertises_its_own_apis(node: Node) -> None:
    """Kafka's split: the controller listener lists the controller's APIs only, the client
    listener never the controller-only ones; an API a listener does not list closes the
    connection unanswered."""
    client, controller = advertised(node.port), advertised(node.controller_port)
    assert set(controller) <= CONTROLLER_APIS, sorted(set(controller) - CONTROLLER_APIS)
    assert not set(client) & CONTROLLER_ONLY, sorted(set(client) & CONTROLLER_ONLY)
    assert 0 in client and 0 not in controller and 52 in controller
    with socket.create_connection(("127.0.0.1", node.controller_port), timeout=10) as s:
        # Metadata v1 on the controller listener: not served there
        s.sendall(struct.pack(">ihhih", 14, 3, 1, 7, 0) + struct.pack(">i", -1))
        s.settimeout(10)
        assert s.recv(4) == b"", "the controller listener answered a Metadata request"


def test_fuzz_every_advertised_api_short(node: Node) -> None:
    started = time.monotonic()
    rng = random.Random(SEED)
    gen = RequestGenerator(
        rng, [node.node_id], [KNOWN_TOPIC], known_topic_ids(node.port, KNOWN_TOPIC)
    )
    problems: list[str] = []
    since = node.output.stat().st_size
    for listener, port in (("client", node.port), ("controller", node.controller_port)):
        stats = Stats(watch=LogWatch(node))
        fuzz_listener(gen, listener, port, short_plan(rng), stats)
        problems += [f"{f}\n    request: {f.request}" for f in stats.findings]
        print(
            f"{listener}: {stats.sent} requests, {stats.closed} closes, slowest "
            f"{stats.slowest:.2f} s ({stats.slowest_what})"
        )
        try:
            health_round_trip(node.bootstrap, HEALTH_TOPIC, f"{SEED}-{listener}")
        except Exception as e:
            problems.append(f"health round trip after the {listener} listener: {e!r}")
            break
    problems += [f"node log:\n{line}" for line in bad_log_lines(node, since)]
    assert node.proc is not None and node.proc.poll() is None, "the node died"
    assert not problems, f"seed {SEED}: {len(problems)} problem(s):\n" + "\n".join(problems[:40])
    print(f"seed {SEED}: clean in {time.monotonic() - started:.1f} s")


@pytest.mark.skipif(LONG_MINUTES <= 0, reason="the long form: set KMIRROR_FUZZ_MINUTES")
def test_fuzz_long() -> None:
    problems = long_run(SEED, LONG_MINUTES, LONG_NODES)
    assert not problems, f"seed {SEED}: {len(problems)} problem(s):\n" + "\n".join(problems[:40])


def _ask(port: int, key: int, version: int, data: dict[str, Any]) -> Any:
    """One request built from ``data``; its answer through kio's native reader."""
    body = build(REGISTRY.spec(key).request_type(version), data)
    conn = Connection(port)
    try:
        _corr, raw = conn.call(version, body, 10.0)
    finally:
        conn.close()
    return decode_answer(key, version, raw)


def test_the_issues_requests_get_kafkas_answers(node: Node) -> None:
    """The requests issue 33 found crashing a handler, each answered with Kafka's error (the
    NOT_CONTROLLER and timeout cases need a quorum of several nodes: unit tests)."""
    since = node.output.stat().st_size
    unknown = uuid.uuid4()
    for version in (10, 11):  # by topic id before v12: an invalid request
        resp = _ask(node.port, 3, version, {"topics": [{"topic_id": unknown, "name": None}]})
        assert [(t.error_code, t.name) for t in resp.topics] == [(ErrorCode.invalid_request, "")]
    [t] = _ask(node.port, 3, 12, {"topics": [{"topic_id": unknown, "name": None}]}).topics
    assert (t.error_code, t.name) == (ErrorCode.unknown_topic_id, None)
    zero = uuid.UUID(int=0)
    for key, part in (
        (83, {"partition": 0, "state_epoch": 0, "start_offset": 0}),
        (84, {"partition": 0, "leader_epoch": 0}),
        (85, {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0}),
        (86, {"partition": 0}),
        (87, {"partition": 0, "leader_epoch": 0}),
    ):
        data = {"group_id": "g", "topics": [{"topic_id": zero, "partitions": [part]}]}
        resp = _ask(node.port, key, 0, data)
        assert [p.error_code for r in resp.results for p in r.partitions] == [
            ErrorCode.unknown_topic_or_partition
        ], key
    [state] = _ask(node.port, 65, 0, {"transactional_ids": ["never-used"]}).transaction_states
    # (NOT_COORDINATOR while __transaction_state is still being created): start time 0
    assert state.error_code in (ErrorCode.transactional_id_not_found, ErrorCode.not_coordinator)
    assert state.transaction_start_time.timestamp() == 0
    create = {"topics": [{"name": HEALTH_TOPIC, "count": 2, "assignments": [{"broker_ids": []}]}]}
    [r] = _ask(node.port, 37, 1, {**create, "timeout": 5000}).results
    assert r.error_code == ErrorCode.invalid_replica_assignment
    name = "é" * 16_383  # 32,766 bytes: a legacy request's longest name, echoed in the message
    [r] = _ask(node.port, 37, 0, {"topics": [{"name": name, "count": 2}], "timeout": 5000}).results
    assert (r.name, r.error_code) == (name, ErrorCode.unknown_topic_or_partition)
    commit = {
        "group_id": "g" * 70_000,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [{"name": HEALTH_TOPIC, "partitions": [{"partition_index": 0}]}],
    }
    resp = _ask(node.port, 8, 9, commit)
    assert [p.error_code for t in resp.topics for p in t.partitions] == [ErrorCode.invalid_group_id]
    heartbeat = {"group_id": "g", "member_id": "m" * 70_000, "member_epoch": 0}
    resp = _ask(node.port, 76, 1, {**heartbeat, "subscribed_topic_names": [HEALTH_TOPIC]})
    assert resp.error_code == ErrorCode.invalid_request
    states = {
        "mirror_name": "m" * 70_000,
        "topics": [
            {"topic_id": unknown, "partitions": [{"partition_index": i} for i in range(1000)]}
        ],
    }
    assert _ask(node.port, 101, 0, states).error_code == MirrorErrorCode.INVALID_MIRROR_NAME
    assert not bad_log_lines(node, since), bad_log_lines(node, since)
