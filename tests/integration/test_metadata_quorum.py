"""A node's metadata goes through the Raft quorum (one voter): its election state survives
restarts in ``quorum-state``, every start is a new epoch with its LeaderChange entry, and what
was committed before a clean stop or a kill -9 is the node's metadata afterwards."""

from __future__ import annotations

import datetime
import json
import socket
import struct
import uuid
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from protocol.records import ControlType, iter_records, parse_control_record, scan_batches
from protocol.registry import REGISTRY

from .clients import admin, create_topic
from .node import Node


def quorum_state(node: Node) -> dict[str, object]:
    data = json.loads((node.log_dir / "__cluster_metadata-0" / "quorum-state").read_text())
    assert isinstance(data, dict)
    return data


def metadata_batches(node: Node) -> list[tuple[int, bool, int | None]]:
    """(leader epoch, control?, control type) of every batch in the metadata log."""
    out = []
    for seg in sorted((node.log_dir / "__cluster_metadata-0").glob("*.log")):
        for batch in scan_batches(seg.read_bytes(), allow_partial_tail=True):
            kind = None
            if batch.is_control:
                rec = next(iter_records(batch))
                kind = int(parse_control_record(rec.key, rec.value).type)
            out.append((batch.partition_leader_epoch, batch.is_control, kind))
    return out


def topics(node: Node) -> set[str]:
    return set(admin(node.bootstrap).list_topics(timeout=10).topics)


def test_metadata_survives_restarts_through_the_quorum(tmp_path: Path) -> None:
    node = Node(tmp_path / "n")
    node.start()
    try:
        create_topic(node.bootstrap, "first", 2)
        state = quorum_state(node)
        assert state["leaderId"] == 1 and state["votedId"] == 1
        epoch = state["leaderEpoch"]
        assert isinstance(epoch, int) and epoch >= 1
        assert node.stop() == 0
        node.start()
        assert "first" in topics(node)
        create_topic(node.bootstrap, "second", 1)
        node.kill()  # unclean: nothing is lost that was committed
        node.start()
        assert {"first", "second"} <= topics(node)
        later = quorum_state(node)["leaderEpoch"]
        assert isinstance(later, int) and later > epoch  # each start is a new election
        batches = metadata_batches(node)
        changes = [e for e, control, kind in batches if control]
        assert all(kind == ControlType.LEADER_CHANGE for _, control, kind in batches if control)
        assert changes == sorted(changes) and len(set(changes)) == 3  # one per epoch
        data_epochs = [e for e, control, _ in batches if not control]
        assert data_epochs == sorted(data_epochs)  # epochs never go down in the log
    finally:
        node.kill()


def _fetch_metadata_log(port: int, epoch: int) -> Any:
    """A Fetch of __cluster_metadata-0 (by its topic id) sent to ``port``, as a voter would."""
    from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic

    body = FetchRequest(
        replica_id=2,
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
        min_bytes=0,
        topics=(
            FetchTopic(
                topic_id=uuid.UUID(int=1),
                partitions=(
                    FetchPartition(
                        partition=0,
                        current_leader_epoch=epoch,
                        fetch_offset=0,
                        last_fetched_epoch=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(REGISTRY.encode_request(13, 7, "peer-or-client", body))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
    _corr, resp = REGISTRY.decode_response(1, 13, frame)
    return resp


def test_only_the_controller_listener_serves_the_metadata_log(tmp_path: Path) -> None:
    """The metadata log holds SCRAM credentials and every config: a client on a broker listener
    that asks for __cluster_metadata-0 by its topic id is told the topic does not exist, as
    Kafka's brokers answer; a quorum peer on the controller listener gets the records."""
    node = Node(tmp_path / "n").start()
    try:
        create_topic(node.bootstrap, "visible", 1)
        epoch = int(quorum_state(node)["leaderEpoch"])  # type: ignore[call-overload]
        client = _fetch_metadata_log(node.port, epoch)
        (t,) = client.responses
        assert t.partitions[0].error_code == ErrorCode.unknown_topic_id
        assert not t.partitions[0].records
        peer = _fetch_metadata_log(node.controller_port, epoch)
        (t,) = peer.responses
        assert t.partitions[0].error_code == ErrorCode.none
        assert t.partitions[0].records
    finally:
        node.stop()
