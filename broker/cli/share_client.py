"""A KIP-932 share-group consumer for ``kafka-console-share-consumer.sh`` (no Python client library
speaks share groups): membership with ShareGroupHeartbeat on the group coordinator, records with
ShareFetch from each assigned partition's leader in one share session per leader, and
acknowledgements riding on the next ShareFetch (or a closing ShareAcknowledge).

As Kafka's KafkaShareConsumer does: the client makes up its member id; the records delivered are
only the offsets the broker says were acquired, each with its delivery count; acquired offsets
with no record behind them (control records, compacted away) are acknowledged as GAP; closing
acknowledges what is pending, ends every share session (epoch -1, which releases what is still
held) and leaves the group (member epoch -1).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from broker.cli.admin import CommandError, code
from broker.cli.kafka_admin import ApiError, KafkaAdmin, kafka_uuid
from broker.cli.message_formatters import Record
from protocol.records.iterate import iter_records
from protocol.records.scan import scan_batches

FIND_COORDINATOR, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 10, 76, 78, 79
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
RETRIABLE_COORDINATOR: Final = frozenset({14, 15, 16})  # loading, not available, not coordinator
FENCED: Final = frozenset({25, 110})  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH
LEADER_MOVED: Final = frozenset({5, 6, 3, 74, 75})
TP = tuple[str, int]


@dataclass
class Session:
    """One share session with a leader: its epoch and the partitions it holds."""

    epoch: int = 0
    partitions: set[TP] = field(default_factory=set)


class ShareConsumer:
    def __init__(self, admin: KafkaAdmin, group: str, topic: str, max_records: int = 500) -> None:
        self.admin, self.group, self.topic = admin, group, topic
        self.member_id = kafka_uuid(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_ms = 5000
        self.coordinator: int | None = None
        self.assigned: set[TP] = set()
        self.names: dict[uuid.UUID, str] = {}
        self.ids: dict[str, uuid.UUID] = {}
        self.leaders: dict[TP, int] = {}
        self.sessions: dict[int, Session] = {}
        self.pending: dict[TP, dict[int, int]] = {}  # offset -> acknowledge type
        self.max_records = max_records
        self._heartbeats: asyncio.Task[None] | None = None

    # --- membership ---------------------------------------------------------------------------

    async def join(self) -> None:
        await self.heartbeat()
        self._heartbeats = asyncio.create_task(self._heartbeat_loop())

    async def _find_coordinator(self) -> int:
        for _ in range(100):
            resp = await self.admin.call(
                FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [self.group]}
            )
            (c,) = resp.coordinators
            err = code(c.error_code)
            if not err:
                self.admin.brokers[int(c.node_id)] = (str(c.host), int(c.port))
                return int(c.node_id)
            if err not in RETRIABLE_COORDINATOR:
                raise ApiError(err, c.error_message)
            await asyncio.sleep(0.2)
        raise CommandError("Timed out waiting for the group coordinator")

    async def heartbeat(self, leave: bool = False) -> None:
        if not self.admin.serves(SHARE_GROUP_HEARTBEAT):
            raise ApiError(35, "The broker does not support SHARE_GROUP_HEARTBEAT")
        for _ in range(50):
            if self.coordinator is None:
                self.coordinator = await self._find_coordinator()
            resp = await self.admin.call(
                SHARE_GROUP_HEARTBEAT,
                {
                    "group_id": self.group,
                    "member_id": self.member_id,
                    "member_epoch": -1 if leave else self.member_epoch,
                    "rack_id": None,
                    "subscribed_topic_names": [self.topic] if self.member_epoch == 0 else None,
                },
                node=self.coordinator,
            )
            err = code(resp.error_code)
            if err in RETRIABLE_COORDINATOR:
                self.coordinator = None
                await asyncio.sleep(0.2)
                continue
            if leave:
                return
            if err in FENCED:  # rejoin from scratch
                self.member_epoch = 0
                continue
            if err:
                raise ApiError(err, resp.error_message)
            self.member_epoch = int(resp.member_epoch)
            self.heartbeat_ms = max(100, int(resp.heartbeat_interval.total_seconds() * 1000))
            if resp.assignment is not None:
                await self._assign(resp.assignment)
            return
        raise CommandError("Timed out waiting for the share group coordinator")

    async def _assign(self, assignment: Any) -> None:
        wanted: set[tuple[uuid.UUID, int]] = {
            (t.topic_id, int(p)) for t in assignment.topic_partitions for p in t.partitions
        }
        if any(tid not in self.names for tid, _ in wanted):
            await self.refresh()
        self.assigned = {(self.names[tid], p) for tid, p in wanted if tid in self.names}

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_ms / 1000)
            with contextlib.suppress(CommandError):
                await self.heartbeat()

    async def refresh(self) -> None:
        found = await self.admin.metadata([self.topic])
        info = found.get(self.topic)
        if info is None:
            return
        if info.topic_id is not None:
            self.names[info.topic_id] = self.topic
            self.ids[self.topic] = info.topic_id
        for p in info.partitions:
            self.leaders[(self.topic, p.partition)] = p.leader

    # --- fetching -----------------------------------------------------------------------------

    def acknowledge(self, record: Record, kind: int) -> None:
        self.pending.setdefault((record.topic, record.partition), {})[record.offset] = kind

    async def poll(self, wait_ms: int) -> list[Record]:
        """One ShareFetch round over every leader of the assignment (acknowledging what is
        pending); the records acquired, in offset order per partition."""
        if not self.assigned:
            await asyncio.sleep(min(wait_ms, self.heartbeat_ms) / 1000)
            return []
        if any(tp not in self.leaders for tp in self.assigned):
            await self.refresh()
        by_leader: dict[int, list[TP]] = {}
        for tp in sorted(self.assigned):
            by_leader.setdefault(self.leaders.get(tp, -1), []).append(tp)
        by_leader.pop(-1, None)
        results = await asyncio.gather(
            *(self._fetch(leader, tps, wait_ms) for leader, tps in by_leader.items())
        )
        return [r for batch in results for r in batch]

    def _acks(self, tps: Iterable[TP]) -> dict[TP, list[dict[str, Any]]]:
        """Pending acknowledgements as batches of one type over consecutive offsets."""
        out: dict[TP, list[dict[str, Any]]] = {}
        for tp in tps:
            acks = self.pending.pop(tp, {})
            batches: list[dict[str, Any]] = []
            for offset in sorted(acks):
                kind = acks[offset]
                last = batches[-1] if batches else None
                if (
                    last
                    and last["last_offset"] == offset - 1
                    and last["acknowledge_types"] == [kind]
                ):
                    last["last_offset"] = offset
                else:
                    batches.append(
                        {"first_offset": offset, "last_offset": offset, "acknowledge_types": [kind]}
                    )
            if batches:
                out[tp] = batches
        return out

    def _topics(self, parts: dict[TP, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), batches in sorted(parts.items()):
            by_topic.setdefault(t, []).append(
                {"partition_index": p, "acknowledgement_batches": batches}
            )
        return [{"topic_id": self.ids[t], "partitions": ps} for t, ps in by_topic.items()]

    async def _fetch(self, leader: int, tps: list[TP], wait_ms: int) -> list[Record]:
        session = self.sessions.setdefault(leader, Session())
        acks = self._acks(tps)
        # the session's partitions: all of them on its first request, then the new ones and
        # those with acknowledgements; forgotten, those no longer assigned
        parts: dict[TP, list[dict[str, Any]]] = {
            tp: acks.get(tp, [])
            for tp in tps
            if session.epoch == 0 or tp not in session.partitions or tp in acks
        }
        forgotten = session.partitions - set(tps) if session.epoch else set()
        resp = await self.admin.call(
            SHARE_FETCH,
            {
                "group_id": self.group,
                "member_id": self.member_id,
                "share_session_epoch": session.epoch,
                "max_wait": wait_ms,
                "min_bytes": 1,
                "max_bytes": 50 * 1024 * 1024,
                "max_records": self.max_records,
                "batch_size": self.max_records,
                "topics": self._topics(parts),
                "forgotten_topics_data": [
                    {"topic_id": self.ids[t], "partitions": [p for tt, p in forgotten if tt == t]}
                    for t in sorted({t for t, _ in forgotten})
                ],
            },
            node=leader,
        )
        err = code(resp.error_code)
        if err:  # the session is gone (e.g. the leader restarted): start a new one
            self.sessions[leader] = Session()
            if err in (FENCED | {122, 123, 133}):  # session not found, bad epoch, no room
                return []
            raise ApiError(err, resp.error_message)
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.partitions = set(tps)
        out: list[Record] = []
        for t in resp.responses:
            name = self.names.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                tp = (name, int(p.partition_index))
                perr = code(p.error_code)
                if perr in LEADER_MOVED:
                    self.leaders.pop(tp, None)
                    continue
                if perr:
                    raise ApiError(perr, p.error_message)
                out.extend(self._records(tp, p))
        return out

    def _records(self, tp: TP, p: Any) -> list[Record]:
        acquired: dict[int, int] = {}
        for a in p.acquired_records:
            for offset in range(int(a.first_offset), int(a.last_offset) + 1):
                acquired[offset] = int(a.delivery_count)
        if not acquired:
            return []
        out: list[Record] = []
        data = bytes(p.records or b"")
        for batch in scan_batches(data, allow_partial_tail=True):
            if batch.is_control:
                continue
            log_append = batch.timestamp_type == 1
            for r in iter_records(batch):
                count = acquired.pop(r.offset, None)
                if count is None:
                    continue
                out.append(
                    Record(
                        topic=tp[0],
                        partition=tp[1],
                        offset=r.offset,
                        timestamp=r.timestamp,
                        timestamp_type=1 if log_append else 0,
                        key=r.key,
                        value=r.value,
                        headers=[(k.decode("utf-8", "replace"), v) for k, v in r.headers],
                        delivery_count=count,
                    )
                )
        for offset in acquired:  # acquired with nothing to deliver
            self.pending.setdefault(tp, {})[offset] = GAP
        return out

    # --- closing ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Acknowledge what is pending, end every share session, leave the group."""
        if self._heartbeats is not None:
            self._heartbeats.cancel()
        for leader, session in list(self.sessions.items()):
            if session.epoch == 0:
                continue
            acks = self._acks(sorted(session.partitions))
            with contextlib.suppress(CommandError):
                await self.admin.call(
                    SHARE_ACKNOWLEDGE,
                    {
                        "group_id": self.group,
                        "member_id": self.member_id,
                        "share_session_epoch": -1,
                        "topics": self._topics(acks),
                    },
                    node=leader,
                )
        with contextlib.suppress(CommandError):
            await self.heartbeat(leave=True)
