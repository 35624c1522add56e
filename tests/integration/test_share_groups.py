"""KIP-932 share groups with confluent-kafka's ShareConsumer (librdkafka 2.16): members sharing
one partition each get records and every record is delivered once when all are acknowledged;
RELEASE redelivers with a higher delivery count, REJECT and the delivery count limit archive;
records of a consumer killed without acknowledging come back after the lock duration, those of
one closed without acknowledging at once; ShareGroupDescribe shows members and assignment; the
share-partition state (__share_group_state) and the group (__consumer_offsets) survive kill -9
and a leader's death on three nodes; transaction markers do not hold the start offset back; bad
share requests (stale session epoch, unknown member, acknowledging what one does not hold,
undecodable bodies) get Kafka's error codes."""

import datetime
import io
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from protocol import lenient
from protocol.registry import REGISTRY
from tests.waits import wait_for

from .clients import admin, create_topic
from .cluster import Cluster
from .node import Node

TOPIC, GROUP = "queue", "sg"
SHARE_NODE = {
    "group__share__enable": "true",
    "group__share__heartbeat__interval__ms": "300",
    "share__auto__offset__reset": "earliest",
    "share__coordinator__state__topic__num__partitions": "3",
}


def _node(workdir: Path, **overrides: str) -> Node:
    one = {"share__coordinator__state__topic__replication__factor": "1"}
    return Node(workdir, **(SHARE_NODE | one | overrides))


def _produce(node: Node, n: int, start: int = 0) -> None:
    """`n` records, one batch each (so that fetches of a few records can split them)."""
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(start, start + n):
        p.produce(TOPIC, value=f"v{i}".encode())
        p.flush(10)
    assert p.flush(10) == 0


def _consumer(node: Node, group: str = GROUP, **conf: Any) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": group, **conf})
    c.subscribe([TOPIC])
    return c


def _poll(c: ShareConsumer, timeout: float = 0.2) -> list[Any]:
    msgs = [m for m in c.poll(timeout) if m is not None]
    for m in msgs:
        assert m.error() is None, m.error()
    return msgs


def _poll_until(c: ShareConsumer, n: int, timeout: float) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += _poll(c)
    assert len(got) >= n, f"{len(got)} of {n} records in {timeout}s: {[m.offset() for m in got]}"
    return got


def _call(node: Node, api_key: int, body: Any, version: int = 1) -> Any:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    cid = b"t932"
    head = struct.pack(">hhih", api_key, version, 7, len(cid)) + cid + b"\x00"
    payload = head + out.getvalue()
    with socket.create_connection(("127.0.0.1", node.port), timeout=15) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
    # after the size and correlation id, the response header's tagged fields (but ApiVersions')
    start = 4 + 4 + (0 if api_key == 18 else 1)
    value, _ = lenient.decode(REGISTRY.spec(api_key).response_type(version), buf, start)
    return value


def _raw(node: Node, api_key: int, version: int, body: bytes) -> bytes | None:
    """One request with a raw body; the response frame (after its size), None if closed."""
    cid = b"bad"
    payload = struct.pack(">hhih", api_key, version, 9, len(cid)) + cid + b"\x00" + body
    with socket.create_connection(("127.0.0.1", node.port), timeout=15) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
    return buf[4:]


def _describe(node: Node, group: str = GROUP) -> Any:
    req = REGISTRY.spec(77).request_type(1)(group_ids=(group,), include_authorized_operations=False)
    (g,) = _call(node, 77, req).groups
    return g


def test_members_share_a_partition_each_record_once(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    cs: list[ShareConsumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        cs = [_consumer(node, **{"max.poll.records": 3}) for _ in range(2)]
        seen: Counter[int] = Counter()
        by_consumer: list[int] = [0, 0]
        total = 0
        deadline = time.monotonic() + 60
        for round_ in range(12):  # records arrive while both members wait on the partition
            _produce(node, 10, start=total)
            total += 10
            while sum(seen.values()) < total and time.monotonic() < deadline:
                for i, c in enumerate(cs):  # implicit mode: the next poll accepts these
                    for m in _poll(c, 0.05):
                        seen[m.offset()] += 1
                        by_consumer[i] += 1
            assert sum(seen.values()) >= total, (round_, sorted(seen))
        for c in cs:
            _poll(c, 0.3)  # accept the last records
        assert sorted(seen) == list(range(total)) and max(seen.values()) == 1, seen
        assert all(by_consumer), by_consumer  # both members got records of the one partition
        g = _describe(node)
        assert (g.error_code, g.group_state, g.assignor_name) == (
            ErrorCode.none,
            "Stable",
            "simple",
        )
        assert len(g.members) == 2
        for m in g.members:  # both members are assigned the one partition
            assert [
                (tp.topic_name, list(tp.partitions)) for tp in m.assignment.topic_partitions
            ] == [(TOPIC, [0])]
            assert list(m.subscribed_topic_names) == [TOPIC]
        # ListGroups shows it as a share group, and filters on that type (KIP-848's v5)
        kp = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10000)
        try:
            listed_kp = kp.list_groups(types_filter=["share"])
            other = kp.list_groups(types_filter=["consumer"])
        finally:
            kp.close()
        assert [g["group_id"] if isinstance(g, dict) else g[0] for g in listed_kp] == [GROUP], (
            listed_kp
        )
        assert other == []
        cs.pop().close()
        wait_for(lambda: len(_describe(node).members) == 1, 15, "the closed member leaves")
        # nothing is left to deliver: all were accepted
        assert _poll(cs[0], 1.0) == []
    finally:
        for c in cs:
            c.close()
        node.kill()


def test_release_reject_and_the_delivery_limit(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1", group__share__delivery__count__limit="2")
    node.start()
    c: ShareConsumer | None = None
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        _produce(node, 4)
        c = _consumer(node, **{"share.acknowledgement.mode": "explicit"})
        first = {m.offset(): m for m in _poll_until(c, 4, 20)}
        assert sorted(first) == [0, 1, 2, 3]
        assert all(m.delivery_count() == 1 for m in first.values())
        c.acknowledge(first[0], AcknowledgeType.REJECT)  # archived: never again
        c.acknowledge(first[1], AcknowledgeType.RELEASE)  # back, delivery count 2
        c.acknowledge(first[2], AcknowledgeType.RELEASE)
        c.acknowledge(first[3], AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        again = {m.offset(): m for m in _poll_until(c, 2, 20)}
        assert sorted(again) == [1, 2]
        assert [again[o].delivery_count() for o in (1, 2)] == [2, 2]
        c.acknowledge(again[1], AcknowledgeType.RELEASE)  # at the limit (2): archived
        c.acknowledge(again[2], AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        _produce(node, 1, start=4)
        later = _poll_until(c, 1, 20)
        assert [(m.offset(), m.delivery_count()) for m in later] == [(4, 1)]
        c.acknowledge(later[0], AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        assert _poll(c, 1.0) == []  # 0 and 1 archived, 2-4 accepted
    finally:
        if c is not None:
            c.close()
        node.kill()


def test_acknowledged_state_survives_a_restart(tmp_path: Path) -> None:
    """The share-partition state is in __share_group_state and the group in __consumer_offsets:
    after kill -9 and a restart the group goes on where it was (accepted and rejected records
    are not delivered again, released ones are) and a member that stayed is still in."""
    node = _node(tmp_path / "n1")
    node.start()
    cs: list[ShareConsumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        create_topic(node.bootstrap, "idle", 1)
        _produce(node, 10)
        # a member of the same group on another topic, alive across the restart
        watcher = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": GROUP})
        watcher.subscribe(["idle"])
        cs.append(watcher)
        c = _consumer(node, **{"share.acknowledgement.mode": "explicit"})
        cs.append(c)
        got = {m.offset(): m for m in _poll_until(c, 10, 20)}
        for o in range(6):
            c.acknowledge(got[o], AcknowledgeType.ACCEPT)
        c.acknowledge(got[6], AcknowledgeType.REJECT)
        c.commit_sync(15)
        c.close()  # 7-9 released, unacknowledged
        cs.remove(c)
        wait_for(lambda: len(_describe(node).members) == 1, 15, "only the watcher is left")
        before = _describe(node)
        (stayed,) = [m.member_id for m in before.members]
        node.kill()
        node.start()
        c = _consumer(node, **{"share.acknowledgement.mode": "explicit"})
        cs.append(c)
        again = _poll_until(c, 3, 30)
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [(7, 2), (8, 2), (9, 2)]
        for m in again:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        assert _poll(c, 1.0) == []
        watcher.poll(0.1)
        after = _describe(node)
        assert stayed in {m.member_id for m in after.members}
        # the group went on from its stored epoch (a group made anew would start at 1 again)
        assert after.group_epoch > before.group_epoch, (before.group_epoch, after.group_epoch)
    finally:
        for consumer in cs:
            consumer.close()
        node.kill()


def test_transactions_control_records_do_not_hold_the_start(tmp_path: Path) -> None:
    """Records of committed transactions are delivered, their markers acknowledged as gaps by
    the client, and the share-partition start offset (read with ReadShareGroupState) moves
    past everything."""
    node = _node(
        tmp_path / "n1",
        transaction__state__log__replication__factor="1",
        transaction__state__log__min__isr="1",
    )
    node.start()
    c: ShareConsumer | None = None
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "tx932"})
        p.init_transactions(15)
        for t in range(3):
            p.begin_transaction()
            for i in range(3):
                p.produce(TOPIC, value=f"t{t}-{i}".encode())
            p.commit_transaction(15)
        c = _consumer(node)
        got = sorted(m.offset() for m in _poll_until(c, 9, 20))
        assert got == [0, 1, 2, 4, 5, 6, 8, 9, 10]  # 3, 7 and 11 are the COMMIT markers
        c.commit_sync(15)
        tid = _topic_id(node)
        req = REGISTRY.spec(84).request_type(0)
        mod = __import__(req.__module__, fromlist=["ReadStateData"])
        body = req(
            group_id=GROUP,
            topics=(
                mod.ReadStateData(
                    topic_id=tid, partitions=(mod.PartitionData(partition=0, leader_epoch=-1),)
                ),
            ),
        )

        def start_offset() -> int:
            (part,) = _call(node, 84, body, version=0).results[0].partitions
            assert part.error_code == ErrorCode.none
            return int(part.start_offset)

        wait_for(lambda: start_offset() == 12, 15, "the start offset past the last marker")
        # DescribeShareGroupOffsets (the admin view): the subscribed topics' start offsets
        desc = REGISTRY.spec(90).request_type(0)
        dmod = __import__(desc.__module__, fromlist=["DescribeShareGroupOffsetsRequestGroup"])
        all_topics = desc(
            groups=(dmod.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=None),)
        )
        (g,) = _call(node, 90, all_topics, version=0).groups
        assert g.error_code == ErrorCode.none
        assert [
            (t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
            for t in g.topics
        ] == [(TOPIC, [(0, 12)])]
        other = desc(
            groups=(dmod.DescribeShareGroupOffsetsRequestGroup(group_id="nope", topics=None),)
        )
        assert (
            _call(node, 90, other, version=0).groups[0].error_code == ErrorCode.group_id_not_found
        )
    finally:
        if c is not None:
            c.close()
        node.kill()


_HOLDER = """
import sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
got = []
while len(got) < int(sys.argv[4]):
    got += [m.offset() for m in c.poll(0.2) if m is not None and m.error() is None]
print(" ".join(map(str, sorted(got))), flush=True)
sys.stdin.read()  # hold the records (never acknowledged) until killed
"""


def test_unacknowledged_records_come_back(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1", group__share__record__lock__duration__ms="3000")
    node.start()
    holder: subprocess.Popen[str] | None = None
    cs: list[ShareConsumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        _produce(node, 5)
        # a consumer in another process takes all five and is killed without acknowledging
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, node.bootstrap, GROUP, TOPIC, "5"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["0", "1", "2", "3", "4"]
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        killed_at = time.monotonic()
        c = _consumer(node, **{"share.acknowledgement.mode": "explicit"})
        cs.append(c)
        back = _poll_until(c, 5, 30)
        waited = time.monotonic() - killed_at
        assert sorted(m.offset() for m in back) == [0, 1, 2, 3, 4]
        assert all(m.delivery_count() == 2 for m in back)
        assert waited > 1.5, f"redelivered after {waited:.1f}s, before the 3 s lock ran out"
        # this one closes without acknowledging: its share session ends and releases them now
        c.close()
        cs.remove(c)
        c2 = _consumer(node, **{"share.acknowledgement.mode": "explicit"})
        cs.append(c2)
        closed_at = time.monotonic()
        back = _poll_until(c2, 5, 30)
        assert all(m.delivery_count() == 3 for m in back)
        for m in back:
            c2.acknowledge(m, AcknowledgeType.ACCEPT)
        c2.commit_sync(15)
        assert time.monotonic() - closed_at < 20
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        for c in cs:
            c.close()
        node.kill()


def test_three_nodes_members_fetch_from_each_leader(tmp_path: Path) -> None:
    """The group's coordinator is one node, the partitions' leaders all three: each leader keeps
    its partition's share state, a share fetch sent to a follower is refused, and a partition
    whose leader dies goes on from its persisted state on the new leader."""
    c = Cluster(tmp_path / "c", **SHARE_NODE, offsets__topic__num__partitions="3").start()
    cs: list[ShareConsumer] = []
    try:
        a = admin(c.bootstrap)
        a.create_topics([NewTopic(TOPIC, 3, 3)], operation_timeout=10)[TOPIC].result(15)
        wait_for(lambda: all(c.known_everywhere(TOPIC, p) for p in range(3)), 20, "the topic")
        leaders = {p: c.partition_state(TOPIC, p)[0] for p in range(3)}  # type: ignore[index]
        p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 5})
        for i in range(90):
            p.produce(TOPIC, value=f"v{i}".encode(), partition=i % 3)
        assert p.flush(15) == 0
        cs = [
            ShareConsumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP}) for _ in range(2)
        ]
        for consumer in cs:
            consumer.subscribe([TOPIC])
        seen: Counter[tuple[int, int]] = Counter()
        deadline = time.monotonic() + 60
        while sum(seen.values()) < 90 and time.monotonic() < deadline:
            for consumer in cs:
                for m in _poll(consumer, 0.1):
                    seen[(m.partition(), m.offset())] += 1
        assert sum(seen.values()) == 90 and max(seen.values()) == 1, seen
        for consumer in cs:
            consumer.commit_sync(15)  # accept the last ones
        # a follower of partition 0 refuses to serve it, naming the leader
        follower = next(n for n in c.nodes if n.node_id != leaders[0])
        tid = _topic_id(follower)
        r = _call(follower, 78, _fetch("m-x", 0, tid))
        (part,) = r.responses[0].partitions
        assert part.error_code == ErrorCode.not_leader_or_follower
        assert part.current_leader.leader_id == leaders[0]
        # partition 0's leader dies: the new leader reads the share-partition's state from
        # __share_group_state, so nothing accepted is delivered again, only new records
        victim = c.node(leaders[0])
        victim.kill()
        survivors = ",".join(n.bootstrap for n in c.nodes if n is not victim)
        p = Producer({"bootstrap.servers": survivors, "linger.ms": 5})
        for i in range(90, 120):
            p.produce(TOPIC, value=f"v{i}".encode(), partition=i % 3)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 90
        while sum(seen.values()) < 120 and time.monotonic() < deadline:
            for consumer in cs:
                for m in _poll(consumer, 0.1):
                    seen[(m.partition(), m.offset())] += 1
        assert sum(seen.values()) == 120 and max(seen.values()) == 1, sorted(
            k for k, n in seen.items() if n > 1
        )
    finally:
        for consumer in cs:
            consumer.close()
        c.stop()


def test_share_groups_are_off_by_default(tmp_path: Path) -> None:
    """As Kafka 4.1 (a preview there): without group.share.enable the share RPCs are not
    served, nor the share coordinator lookup."""
    node = Node(tmp_path / "n1")
    node.start()
    try:
        av = REGISTRY.spec(18).request_type(3)(
            client_software_name="t932", client_software_version="1"
        )
        served = {int(k.api_key) for k in _call(node, 18, av, 3).api_keys}
        assert served.isdisjoint({76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}), served
        find = REGISTRY.spec(10).request_type(4)(key_type=2, coordinator_keys=("g:x:0",))
        (row,) = _call(node, 10, find, version=4).coordinators
        assert row.error_code == ErrorCode.invalid_request
    finally:
        node.kill()


def _fetch(
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    acks: tuple[tuple[int, int, int], ...] = (),
    group: str = GROUP,
) -> Any:
    cls = REGISTRY.spec(78).request_type(1)
    mod = __import__(cls.__module__, fromlist=["FetchTopic"])
    batches = tuple(
        mod.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=(t,))
        for f, last, t in acks
    )
    return cls(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=2,
        batch_size=2,
        topics=(
            mod.FetchTopic(
                topic_id=topic_id,
                partitions=(
                    mod.FetchPartition(partition_index=0, acknowledgement_batches=batches),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def _partition(resp: Any) -> Any:
    assert resp.error_code == ErrorCode.none, resp
    (t,) = resp.responses
    (p,) = t.partitions
    return p


def test_bad_share_requests_get_kafka_errors(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        _produce(node, 6)
        tid = _topic_id(node)
        # ApiVersions: Kafka 4.1's versions of the share RPCs
        av = REGISTRY.spec(18).request_type(3)(
            client_software_name="t932", client_software_version="1"
        )
        served = {
            int(k.api_key): (k.min_version, k.max_version) for k in _call(node, 18, av, 3).api_keys
        }
        assert [served.get(k) for k in (76, 77, 78, 79)] == [(1, 1)] * 4
        assert [served.get(k) for k in (83, 84, 85, 86, 87, 90)] == [(0, 0)] * 6
        hb = REGISTRY.spec(76).request_type(1)
        joined = _join(node, "m-a")
        assert joined.member_epoch == 1 and joined.assignment is not None
        unknown = _call(node, 76, hb(group_id=GROUP, member_id="nobody", member_epoch=1))
        assert unknown.error_code == ErrorCode.unknown_member_id
        fenced = _call(node, 76, hb(group_id=GROUP, member_id="m-a", member_epoch=9))
        assert fenced.error_code == ErrorCode.fenced_member_epoch
        # a session: epoch 0 opens it, then 1, 2, ...
        p = _partition(_call(node, 78, _fetch("m-a", 0, tid)))
        acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
        assert acquired == [(0, 1, 1)]  # MaxRecords 2: two one-record batches
        # a stale or skipped epoch, and a member without a session
        assert _call(node, 78, _fetch("m-a", 0 + 5, tid)).error_code == (
            ErrorCode.invalid_share_session_epoch
        )
        assert _call(node, 78, _fetch("nobody", 1, tid)).error_code == (
            ErrorCode.share_session_not_found
        )
        # another member acknowledging m-a's records: INVALID_RECORD_STATE, nothing changes
        _partition(_call(node, 78, _fetch("m-b", 0, tid)))  # m-b's session: gets 2-3
        r = _partition(_call(node, 78, _fetch("m-b", 1, tid, acks=((0, 1, 1),))))
        assert r.acknowledge_error_code == ErrorCode.invalid_record_state
        # m-a's own acknowledgement works (epoch 1 is next for m-a)
        r = _partition(_call(node, 78, _fetch("m-a", 1, tid, acks=((0, 1, 1),))))
        assert r.acknowledge_error_code == ErrorCode.none
        # epoch 1 again is stale now
        assert _call(node, 78, _fetch("m-a", 1, tid)).error_code == (
            ErrorCode.invalid_share_session_epoch
        )
        # acknowledgements on a session-opening fetch are refused
        assert _call(node, 78, _fetch("m-c", 0, tid, acks=((4, 4, 1),))).error_code == (
            ErrorCode.invalid_request
        )
        # ShareAcknowledge: epoch 0 cannot acknowledge; an unknown topic id
        ack_cls = REGISTRY.spec(79).request_type(1)
        assert (
            _call(
                node, 79, ack_cls(group_id=GROUP, member_id="m-a", share_session_epoch=0, topics=())
            ).error_code
            == ErrorCode.invalid_share_session_epoch
        )
        mod = __import__(ack_cls.__module__, fromlist=["AcknowledgeTopic"])
        bogus = ack_cls(
            group_id=GROUP,
            member_id="m-a",
            share_session_epoch=2,
            topics=(
                mod.AcknowledgeTopic(
                    topic_id=uuid.uuid4(),
                    partitions=(
                        mod.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=(
                                mod.AcknowledgementBatch(
                                    first_offset=0, last_offset=0, acknowledge_types=(1,)
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )
        resp = _call(node, 79, bogus)
        assert resp.error_code == ErrorCode.none
        assert resp.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id
        # a classic consumer cannot take the share group's id
        classic = Consumer(
            {"bootstrap.servers": node.bootstrap, "group.id": GROUP, "session.timeout.ms": 6000}
        )
        try:
            classic.subscribe([TOPIC])
            errors: list[Any] = []
            deadline = time.monotonic() + 15
            while not errors and time.monotonic() < deadline:
                try:
                    m = classic.poll(0.2)
                except KafkaException as e:
                    errors.append(e.args[0])
                    break
                if m is not None and m.error():
                    errors.append(m.error())
            assert errors and errors[0].code() == ErrorCode.inconsistent_group_protocol, errors
        finally:
            classic.close()
        # bodies that cannot be decoded: the connection is closed unanswered, as Kafka's
        # socket server does, and nothing crashes
        for api_key in (76, 77, 78, 79, 83, 84, 85, 86, 87, 90):
            resp = _raw(node, api_key, 1 if api_key < 80 else 0, b"\x7f\xff\xff\xf0garbage")
            assert resp is None, (api_key, resp)
        assert node.proc is not None and node.proc.poll() is None  # still serving
        assert "Traceback" not in node.output.read_text(errors="replace"), node.log_tail()
    finally:
        node.kill()


def _topic_id(node: Node) -> uuid.UUID:
    req = REGISTRY.spec(3).request_type(12)
    mod = __import__(req.__module__, fromlist=["MetadataRequestTopic"])
    body = req(
        topics=(mod.MetadataRequestTopic(topic_id=None, name=TOPIC),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (t,) = _call(node, 3, body, version=12).topics
    return t.topic_id


def _join(node: Node, member: str) -> Any:
    """ShareGroupHeartbeat to join, once FindCoordinator made `__consumer_offsets` appear."""
    find = REGISTRY.spec(10).request_type(4)(key_type=0, coordinator_keys=(GROUP,))
    hb = REGISTRY.spec(76).request_type(1)
    body = hb(group_id=GROUP, member_id=member, member_epoch=0, subscribed_topic_names=(TOPIC,))
    got: list[Any] = []

    def joined() -> bool:
        _call(node, 10, find, version=4)
        got.append(_call(node, 76, body))
        return bool(got[-1].error_code == ErrorCode.none)

    wait_for(joined, 20, "the share group coordinator", step=0.2, detail=lambda: got[-1:])
    return got[-1]
